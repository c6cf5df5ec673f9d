"""One message per turn within Discord's edit budget; posting when Discord fails; Regenerate
after a cancelled turn."""

from __future__ import annotations

import asyncio
import itertools
import json

import discord.http

from testkit.queue import wait_until
from testkit.waits import wait_for
from tests.bot.helpers import (
    edits_idle,
    is_result,
    posted_turns,
    result,
    results,
    say,
    status_message,
    turn_messages,
    turns_of,
)

EDIT_LIMIT, EDIT_WINDOW = 5, 5.0  # Discord: about 5 edits per 5 s per channel


async def start_game(w, channel, member) -> None:
    await say(w, w.alice, "game start", channel=channel)
    await say(w, member, "game join", {"character": "qiqi"}, channel=channel)


async def test_three_channels_five_turns_each_within_the_edit_budget(world, start_bot, start_worker, sessions):
    w, server = world, world.server
    bot = await start_bot()
    # Counted: queue-position refreshes (one query each), and the progress NOTIFYs that used to trigger them.
    calls = {"refresh": 0, "progress": 0}
    positions, progress = bot.queue.positions, bot.board.progress

    async def counting_positions(s, turn_ids):
        calls["refresh"] += 1
        return await positions(s, turn_ids)

    def counting_progress(*a):
        calls["progress"] += 1
        return progress(*a)

    bot.queue.positions, bot.board.progress = counting_positions, counting_progress

    games3 = w.guild.create_text_channel("games-3")
    channels = [w.games, w.games2, games3]
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    for channel, member in zip(channels, (w.alice, w.bob, w.carol), strict=True):
        await start_game(w, channel, member)
    # Every turn queued first (status messages show positions up to 15), then one worker for all.
    for seq in range(5):
        for channel, member in zip(channels, (w.alice, w.bob, w.carol), strict=True):
            assert "is queued" in await say(w, member, "act", {"motion": "walk", "background": f"town {seq}"}, channel=channel)
    await start_worker(films=["qiqi"], backend_options={"delay": 1.2})

    for channel in channels:
        for seq in range(1, 6):
            await result(w, seq, channel, timeout=90)
    turns = await posted_turns(sessions, 15, timeout=30)
    await wait_for(lambda: edits_idle(bot), timeout=30, what="the bot's edits done")  # no straggling edit left

    generating = 0
    for channel in channels:
        # one message per turn: its status message, edited into the post
        for seq in range(1, 6):
            (m,) = turn_messages(w, seq, channel)
            assert is_result(m) and m.attachments and m.edits[-1]["files"] == [f"turn-{seq}.mp4"]
        assert len([m for m in server.channel_messages(channel) if m.embeds]) == 5, "no other turn message"
        times = [at for at, _ in server.channel_edits(channel)]
        shown = [json.dumps(e["body"]) for m in server.channel_messages(channel) for e in m.edits]
        assert any("Queue position" in b for b in shown)
        # Progress is routine: with five status messages a channel refreshing their positions, a
        # turn's "generating" edit may wait past its post and be dropped (the budget is short
        # there by design); over the three channels some are shown.
        generating += sum("generating" in b for b in shown)
        assert server.max_edits_in_window(channel, EDIT_WINDOW) <= EDIT_LIMIT, f"{channel.name}: {times}"
        # Routine edits (positions, progress) are spaced out; a turn's post (its MP4) is a final
        # edit, which bot.parts.edits lets go at once when the window has room, so it may follow closely.
        edits = sorted((e["at"], any(f.endswith(".mp4") for f in e["files"]))
                       for m in server.channel_messages(channel) for e in m.edits if e["via"] == "channel")
        assert all(b - a >= 0.05 for (a, _), (b, post) in itertools.pairwise(edits) if not post), "routine edits spaced"
    assert generating > 0, "no progress shown in any channel"
    assert all(t.posted_message_id == t.status_message_id for t in turns)
    # Positions are refreshed when the queue changes (15 turns queued, 15 started, 15 finished;
    # bursts coalesce), not on every progress NOTIFY.
    assert 0 < calls["refresh"] <= 45 < calls["progress"], calls
    assert server.unhandled == []


class _QuickRetries:
    """discord.py's own HTTP client retries a 500/502 four times, sleeping 1, 3, 5 and 7 s; this
    test keeps that behaviour (every retry reaches the fake) at a hundredth of the wait."""

    def __getattr__(self, name):
        return getattr(asyncio, name)

    @staticmethod
    async def sleep(delay, result=None):  # sleep: the stand-in for asyncio.sleep, not a wait of its own
        return await asyncio.sleep(delay / 100, result)  # sleep: discord.py's own retry pause, scaled down


async def test_discord_failing_a_post_is_retried_then_skipped_and_later_turns_follow(world, start_bot, start_worker, sessions, monkeypatch):
    w, server = world, world.server
    monkeypatch.setattr(discord.http, "asyncio", _QuickRetries())
    await start_bot(post_retry_delays=(0.3, 0.6))  # three tries in all
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await start_game(w, w.games, w.alice)
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    first = status_message(w, 1)
    # Discord answers every edit of turn #1's message with 500, then 502.
    path = rf"^/channels/{w.games.id}/messages/{first.id}$"
    server.fail_next("PATCH", path, status=500, times=5)
    server.fail_next("PATCH", path, status=502, times=1000)
    await say(w, w.alice, "act", {"motion": "run", "background": "street"})
    await say(w, w.alice, "act", {"motion": "jump", "background": "harbor"})
    await start_worker(films=["qiqi"])

    notice = await server.wait_for_message(w.games, lambda m: "could not be posted" in m.content, timeout=60)
    assert notice.content == "Turn #1 could not be posted: Discord kept failing. It is kept in /history."
    second, third = await result(w, 2), await result(w, 3)
    turns = await posted_turns(sessions, 3, timeout=10)
    t1 = turns[0]
    assert t1.posted_message_id is None and "502" in t1.post_error and t1.post_attempts == 2
    tries = [r for r in server.requests_to("PATCH", "/channels/{channel_id}/messages/{message_id}") if r.files and r.params["message_id"] == str(first.id)]
    assert len(tries) == 3 * 5 and {r.status for r in tries} <= {500, 502}  # 3 tries, each retried by discord.py
    # the later turns were held back while #1 was retried, then posted in order after the notice
    post_at = {m.id: m.edits[-1]["at"] for m in (second, third)}
    notice_at = next(r for r in server.requests_to("POST", "/channels/{channel_id}/messages") if r.json.get("content") == notice.content)
    assert second.id < third.id and post_at[second.id] < post_at[third.id]
    assert [r.route for r in server.requests[server.requests.index(notice_at):] if r.files] == [
        "/channels/{channel_id}/messages/{message_id}"
    ] * 2
    assert [m.id for m in results(w)] == [second.id, third.id]
    assert not is_result(server.messages[first.id])


async def test_regenerate_after_a_cancelled_turn(world, start_bot, start_worker, sessions):
    """alice acts (#1), bob acts (#2) while #1 runs, bob cancels #2: #1 is still the latest turn
    that can be regenerated."""
    w, server = world, world.server
    await start_bot()
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await start_game(w, w.games, w.alice)
    await say(w, w.bob, "game join", {"character": "jiji"})
    await start_worker(films=["qiqi"], backend_options={"delay": 1.5})
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    await wait_until(lambda: _running(sessions), timeout=20)
    await say(w, w.bob, "act", {"motion": "talk", "background": "bakery"})
    (_, t2) = await turns_of(sessions)
    h = await server.click(status_message(w, 2), w.bob, f"ag:cancel:{t2.id}")
    assert (await h.wait_followup(timeout=15)).content == "Turn #2 is cancelled."

    first = await result(w, 1)
    h = await server.click(first, w.alice, first.custom_ids[0])
    assert (await h.wait_followup(timeout=15)).content == "Turn #1 is being generated again with a new seed."
    again = await server.wait_for_message(w.games, lambda m: is_result(m, 1), after=first, timeout=30)
    assert server.messages[first.id].components == []  # the first take keeps its clip, loses its button
    (t1, t2) = await posted_turns(sessions, 1)
    assert t1.posted_message_id == again.id == t1.status_message_id and t2.status == "cancelled"


async def _running(sessions) -> bool:
    return any(t.status == "running" for t in await turns_of(sessions))


async def test_a_left_over_regenerate_button_when_no_turn_is_left(world, start_bot, start_worker, sessions):
    """alice's only turn is regenerated and the new take cancelled, so the game has no turn left to
    regenerate; the first take's button, left in place because removing it failed, gets a refusal
    (it used to read the missing latest turn: an internal error)."""
    w, server = world, world.server
    await start_bot()
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await start_game(w, w.games, w.alice)
    worker = await start_worker(films=["qiqi"])
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    first = await result(w, 1)
    worker.stop()  # the new take stays queued
    await asyncio.wait_for(worker.task, 30)

    kept = server.fail_next("PATCH", rf"^/channels/\d+/messages/{first.id}$", status=403, code=50013, message="Missing Permissions")
    h = await server.click(first, w.alice, first.custom_ids[0])
    assert (await h.wait_followup(timeout=15)).content == "Turn #1 is being generated again with a new seed."
    await server.wait_until(lambda: kept.hits, timeout=10, what="the try to remove the first take's button")
    (t1,) = await turns_of(sessions)
    queued = await server.wait_for_message(w.games, lambda m: f"ag:cancel:{t1.id}" in m.custom_ids, after=first, timeout=10)
    h = await server.click(queued, w.alice, f"ag:cancel:{t1.id}")
    assert (await h.wait_followup(timeout=15)).content == "Turn #1 is cancelled."

    assert server.messages[first.id].custom_ids == [f"ag:regen:{t1.id}"]
    h = await server.click(first, w.alice, f"ag:regen:{t1.id}")
    assert (await h.wait_followup(timeout=15)).content == "This game has no finished turn to regenerate."
