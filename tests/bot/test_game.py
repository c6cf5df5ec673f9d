"""A whole game through Discord: the real bot, the fake Discord, Postgres and a preview worker."""

from __future__ import annotations

import json

from db import sessions as game_sessions
from game.states import STATE_NAMES, describe
from tests.bot.helpers import (
    answer,
    command,
    ffprobe_frames,
    field,
    patches_with_files,
    posted_turns,
    result,
    say,
    turn_messages,
)

CHANNEL_MESSAGES = ("POST", "/channels/{channel_id}/messages")


def check_embed(embed: dict, turn, film_names: dict) -> None:
    """The posted embed shows exactly what the database stored for the turn."""
    assert embed["description"] == turn.instruction.replace("*", "\\*").replace("_", "\\_")
    assert field(embed, "Author") == turn.author_name
    assert field(embed, "Motion scope") == f"{turn.motion_scope:g} (motion level {turn.motion_level})"
    for cid in turn.characters:
        lines = field(embed, film_names[cid]).split("\n")
        before, after = turn.states_before[cid], turn.states_after[cid]
        assert lines == [describe(n, before[n], after[n]) for n in STATE_NAMES]


async def test_full_game_two_players(world, start_bot, start_worker, sessions):
    # long: one game's story from /game start to its end, each step building on the last
    w, server = world, world.server
    await start_bot()
    await start_worker(films=["qiqi"], backend_options={"delay": 1.2})

    assert "No film is configured" in await say(w, w.alice, "game start")
    assert "Qiqi" in await say(w, w.erin, "admin film", {"film": "qiqi"})
    assert "has started" in await say(w, w.alice, "game start")
    assert "already running" in await say(w, w.bob, "game start")
    assert "You play Qiqi" in await say(w, w.alice, "game join", {"character": "qiqi"})

    ac = await server.autocomplete(w.guild, w.games, w.bob, "game join", {"character": ""}, focused="character")
    choices = (await ac.wait_response()).choices
    assert {"name": "Qiqi (played by alice)", "value": "qiqi"} in choices and {"name": "Jiji", "value": "jiji"} in choices

    assert "already played by alice" in await say(w, w.bob, "game join", {"character": "qiqi"})
    assert "You play Jiji" in await say(w, w.bob, "game join", {"character": "Jiji"})
    assert "have not joined" in await say(w, w.carol, "act", {"motion": "run", "background": "town"})

    ac = await server.autocomplete(w.guild, w.games, w.alice, "act", {"motion": "fly"}, focused="motion")
    assert (await ac.wait_response()).choices[0] == {"name": "fly on broomstick", "value": "fly on broomstick"}
    ac = await server.autocomplete(w.guild, w.games, w.alice, "act", {"motion": "x", "with": "Jiji, To"}, focused="with")
    assert (await ac.wait_response()).choices == [{"name": "Jiji, Tombo", "value": "Jiji, Tombo"}]

    plays = [
        (w.alice, {"motion": "fly on broomstick", "background": "sky", "adverb": "quickly", "time": "night"}),
        (w.bob, {"motion": "talk", "background": "bakery", "with": "Qiqi"}),
        (w.alice, {"motion": "sleep", "background": "bedroom", "adverb": "calmly"}),
    ]
    for member, options in plays:
        text = await say(w, member, "act", options)
        assert "is queued" in text, text

    posted = [await result(w, seq) for seq in (1, 2, 3)]
    assert [m.id for m in posted] == sorted(m.id for m in posted)  # in order
    turns = await posted_turns(sessions, 3)
    names = {"qiqi": "Qiqi", "jiji": "Jiji"}
    assert [t.status for t in turns] == ["done"] * 3
    assert turns[1].instruction == "Character: Jiji, Qiqi; Motion: talk; Background: bakery."
    for m, t in zip(posted, turns, strict=True):
        assert len(m.attachments) == 1 and m.attachments[0].filename == f"turn-{t.seq}.mp4"
        assert m.attachments[0].data == t.mp4
        assert ffprobe_frames(m.attachments[0].data) == 17
        embed = m.embeds[0]
        assert embed["title"] == f"Turn #{t.seq} · preview" and "Preview clip" in embed["footer"]["text"]
        check_embed(embed, t, names)
        assert t.posted_message_id == m.id
    # the states carried from turn to turn
    assert turns[2].states_before["qiqi"] == turns[1].states_after["qiqi"]

    # one message per turn: queued with a Cancel button, a progress bar edited in place, then
    # edited into the post (the clip, the final embed, Regenerate)
    progress = []
    for m, t in zip(posted, turns, strict=True):
        assert turn_messages(w, t.seq) == [m] and m.id == t.status_message_id
        assert m.edits[-1]["files"] == [f"turn-{t.seq}.mp4"], "the post is the last edit"
        progress += [e for e in m.edits if f"Turn #{t.seq} · generating" in json.dumps(e["body"], ensure_ascii=False)]
    # running turns show a progress bar (coalesced within the channel's edit budget)
    assert progress and all("%" in json.dumps(e["body"], ensure_ascii=False) for e in progress)
    edits = sorted(e["at"] for m in posted for e in m.edits)
    assert all(later - earlier >= 5.0 for earlier, later in zip(edits, edits[5:], strict=False)), "at most 5 edits per 5 s in a channel"
    queued_post = [r for r in server.requests_to(*CHANNEL_MESSAGES) if "queued" in json.dumps(r.json)][0]
    assert queued_post.json["components"][0]["components"][0]["custom_id"] == f"ag:cancel:{turns[0].id}"

    # nothing posted to the channel may ping anyone
    for r in server.requests_to(*CHANNEL_MESSAGES):
        assert r.json["allowed_mentions"] == {"parse": []}, r.json
    assert [r for r in server.requests_to(*CHANNEL_MESSAGES) if r.files] == []
    assert len(patches_with_files(server)) == 3
    statuses = [r for r in server.requests_to(*CHANNEL_MESSAGES) if r.json.get("embeds")]
    assert len(statuses) == 3 and all(r.json.get("enforce_nonce") and r.json.get("nonce") for r in statuses)

    # /status shows every character's bars as stored
    h, _ = await command(w, w.bob, "status")
    _, embeds, ephemeral = await answer(h)
    async with sessions() as s:
        gs = await game_sessions.live_session(s, w.games.id)
        states = await game_sessions.states(s, gs.id)
    assert field(embeds[0], "Qiqi — alice").split("\n") == [describe(n, None, getattr(states["qiqi"], n)) for n in STATE_NAMES]
    assert field(embeds[0], "Jiji — bob").split("\n") == [describe(n, None, getattr(states["jiji"], n)) for n in STATE_NAMES]

    h, _ = await command(w, w.alice, "history", {"count": 2})
    _, embeds, _ = await answer(h)
    assert "#2" in embeds[0]["description"] and "#3" in embeds[0]["description"] and "#1" not in embeds[0]["description"]
    assert "No turns are waiting" in await say(w, w.alice, "queue")

    h, _ = await command(w, w.alice, "export")
    m = await h.wait_followup(timeout=30)
    assert m.ephemeral and "3 shots" in m.content
    assert ffprobe_frames(m.attachments[0].data) == 3 * 17

    assert "You left" in await say(w, w.bob, "game leave")
    assert server.unhandled == []
