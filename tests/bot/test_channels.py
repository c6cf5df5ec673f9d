"""Two channels of one server play at once, on two films, without crossing."""

from __future__ import annotations

import asyncio

from db import sessions as game_sessions
from tests.bot.helpers import field, result, results, say, setup_game, status_message, turns_of


async def test_two_channels_play_at_once(world, start_bot, start_worker, sessions):
    w = world
    await start_bot()
    await start_worker(films=["qiqi", "ponyo"], concurrency=2, backend_options={"delay": 0.6})

    await say(w, w.erin, "admin film", {"film": "qiqi"})
    assert "This channel now plays Ponyo" in await say(w, w.erin, "admin film", {"film": "ponyo", "scope": "channel"}, channel=w.games2)
    await say(w, w.alice, "game start")
    await say(w, w.bob, "game start", channel=w.games2)
    assert "Ponyo" in await say(w, w.bob, "game join", {"character": "ponyo"}, channel=w.games2)
    # Sosuke is Ponyo's, not Qiqi's: the cast follows the channel's film
    assert "not a playable character" in await say(w, w.alice, "game join", {"character": "sosuke"})
    await say(w, w.alice, "game join", {"character": "qiqi"})

    async def play(member, channel, moves):
        return [await say(w, member, "act", {"motion": m, "background": b}, channel=channel) for m, b in moves]

    # both channels play at the same time (each channel's own turns in order)
    acts = await asyncio.gather(
        play(w.alice, w.games, [("walk", "town"), ("run", "street")]),
        play(w.bob, w.games2, [("swim", "sea"), ("jump", "harbor")]),
    )
    assert all("is queued" in a for a in acts[0] + acts[1]), acts

    a = [await result(w, seq, w.games) for seq in (1, 2)]
    b = [await result(w, seq, w.games2) for seq in (1, 2)]
    assert [m.embeds[0]["description"] for m in a] == [
        "Character: Qiqi; Motion: walk; Background: town.",
        "Character: Qiqi; Motion: run; Background: street.",
    ]
    assert [m.embeds[0]["description"] for m in b] == [
        "Character: Ponyo; Motion: swim; Background: sea.",
        "Character: Ponyo; Motion: jump; Background: harbor.",
    ]
    assert len(results(w, w.games)) == 2 and len(results(w, w.games2)) == 2
    assert "Ponyo" in b[0].embeds[0]["footer"]["text"] and "Kiki" in a[0].embeds[0]["footer"]["text"]

    turns = await turns_of(sessions)
    # the two sessions ran side by side: the second channel did not wait for the first to finish
    by_session: dict[int, list] = {}
    for t in turns:
        by_session.setdefault(t.session_id, []).append(t)
    (s1, s2) = by_session.values()
    assert s1[0].started_at < s2[-1].finished_at and s2[0].started_at < s1[-1].finished_at
    async with sessions() as s:
        gs = await game_sessions.live_session(s, w.games2.id)
        st = await game_sessions.states(s, gs.id)
    assert list(st) == ["ponyo"]
    assert field(b[1].embeds[0], "Ponyo").split("\n")[0].endswith(f"{st['ponyo'].stamina} ({s2[1].delta_stamina * 5:+d})")


async def test_queued_status_messages_follow_the_queue(world, start_bot, start_worker, sessions):
    """A turn waiting behind others shows its place, and the message moves up as the queue does."""
    w = world
    await start_bot()
    await setup_game(w)
    await say(w, w.bob, "game start", channel=w.games2)
    await say(w, w.bob, "game join", {"character": "jiji"}, channel=w.games2)
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    await say(w, w.alice, "act", {"motion": "run", "background": "street"})
    await say(w, w.bob, "act", {"motion": "eat", "background": "bakery"}, channel=w.games2)
    waiting = status_message(w, 1, w.games2)
    # The fair order alternates the server's channels: bob's turn goes after alice's first, not her second.
    assert field(waiting.embeds[0], "Queue position") == "2"

    await start_worker(films=["qiqi"], backend_options={"delay": 1.0})
    await w.server.wait_until(lambda: "1" in _positions_shown(waiting), timeout=30)
    await result(w, 1, w.games2, timeout=40)
    shown = _positions_shown(waiting)
    assert shown[0] == "1" and shown == sorted(shown, reverse=True)  # next, then generating: only ever moves up


def _positions_shown(msg) -> list[str]:
    """The queue positions a status message was edited to show, in order."""
    return [
        f["value"]
        for edit in msg.edits
        for embed in edit["body"].get("embeds") or []
        for f in embed.get("fields", [])
        if f["name"] == "Queue position"
    ]
