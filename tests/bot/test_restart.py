"""Restarts: a turn finished while the bot was down is posted once; buttons keep working."""

from __future__ import annotations

import aiohttp
from sqlalchemy import func, text, update

from db.models import Turn
from game.states import STATE_START
from testkit.queue import wait_until
from testkit.waits import Passes
from tests.bot.conftest import stop_bot
from tests.bot.helpers import (
    audit_actions,
    closed_as,
    field,
    is_result,
    posted_turns,
    result,
    results,
    say,
    setup_game,
    status_message,
    turns_of,
)

RESULT_POSTS = ("POST", "/channels/{channel_id}/messages")
EDITS = ("PATCH", "/channels/{channel_id}/messages/{message_id}")


def result_posts(server, turn_id: int):
    """New messages carrying the turn's post (only when its status message is missing)."""
    return [r for r in server.requests_to(*RESULT_POSTS) if f"ag:regen:{turn_id}" in str(r.json.get("components"))]


def post_edits(server, message_id: int):
    """Edits that turned a status message into its post (they upload the clip)."""
    return [r for r in server.requests_to(*EDITS) if r.files and r.params["message_id"] == str(message_id)]


async def _lose_the_mark(sessions, turn_id: int) -> None:
    """As if the poster died after Discord had the post but before the database recorded it, and
    its claim's lease then ran out."""
    async with sessions.begin() as s:
        await s.execute(
            update(Turn).where(Turn.id == turn_id).values(posted_at=None, posted_message_id=None, post_claimed_at=func.now() - text("interval '10 minutes'"))
        )


async def test_restart_between_finish_and_post(world, start_bot, start_worker, sessions):
    w, server = world, world.server
    bot = await start_bot()
    await setup_game(w)
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    await stop_bot(w, bot)

    # the turn is generated while no bot is connected
    await start_worker(films=["qiqi"])
    await wait_until(lambda: _all_done(sessions), timeout=30)
    assert results(w) == []

    bot = await start_bot()  # the sweep at start posts what was missed, into the turn's status message
    passes = Passes(bot.notifier, "post_pending")
    first = await result(w, 1)
    (turn,) = await posted_turns(sessions, 1)
    assert turn.posted_message_id == first.id == turn.status_message_id and first.attachments[0].data == turn.mp4
    for _ in range(2):  # two more sweeps, each to its end: nothing is posted twice
        mark = passes.mark()
        await bot.maintenance.sweep()  # what the scheduler runs every sweep_seconds: it wakes the poster
        await passes.after(mark)
    assert len(results(w)) == 1 and len(post_edits(server, first.id)) == 1 and result_posts(server, turn.id) == []

    # A poster that died between the edit and mark_posted: the claim expires and the same message
    # is edited again (an edit is idempotent), however long after.
    await _lose_the_mark(sessions, turn.id)
    await wait_until(lambda: _posted(sessions, turn.id), timeout=10)
    assert len(post_edits(server, first.id)) == 2 and result_posts(server, turn.id) == []
    assert len(results(w)) == 1
    (turn,) = await posted_turns(sessions, 1)
    assert turn.posted_message_id == first.id


async def _one_turn_queued_while_the_bot_is_down(w, start_bot, sessions):
    """Alice's turn queued through the bot, which then stops before the turn is posted."""
    bot = await start_bot()
    await setup_game(w)
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    await stop_bot(w, bot)
    (turn,) = await turns_of(sessions)
    return turn


async def test_deleted_status_message_is_replaced_once(world, start_bot, start_worker, sessions):
    """Someone deleted the status message: the post is sent as a new message (with a nonce) and
    recorded at once; a re-post after a lost mark finds that message in the channel instead of
    sending again, even once Discord has forgotten the nonce."""
    w, server = world, world.server
    turn = await _one_turn_queued_while_the_bot_is_down(w, start_bot, sessions)
    async with aiohttp.ClientSession() as http:  # deleted through the API, as a moderator would
        url = f"{server.api_base}/channels/{w.games.id}/messages/{turn.status_message_id}"
        async with http.delete(url, headers={"Authorization": f"Bot {server.token}"}) as r:
            assert r.status == 204
    assert server.messages[turn.status_message_id].deleted

    await start_worker(films=["qiqi"])
    await start_bot()
    posted = await result(w, 1)
    (turn,) = await posted_turns(sessions, 1)
    assert posted.id != turn.status_message_id and turn.posted_message_id == posted.id
    (send,) = result_posts(server, turn.id)
    assert send.json["nonce"] and send.json["enforce_nonce"] is True

    server._nonces.clear()  # Discord keeps nonces only a few minutes
    await _lose_the_mark(sessions, turn.id)
    await wait_until(lambda: _posted(sessions, turn.id), timeout=10)
    assert len(result_posts(server, turn.id)) == 1 and len(results(w)) == 1
    (turn,) = await posted_turns(sessions, 1)
    assert turn.posted_message_id == posted.id


async def _all_done(sessions) -> bool:
    turns = await turns_of(sessions)
    return bool(turns) and all(t.status == "done" for t in turns)


async def _posted(sessions, turn_id: int) -> bool:
    return any(t.id == turn_id and t.posted_at is not None for t in await turns_of(sessions))


async def _posted_as(sessions, turn_id: int, message_id: int) -> bool:
    return any(t.id == turn_id and t.posted_message_id == message_id for t in await turns_of(sessions))


async def test_cancel_and_regenerate_buttons_also_after_restart(world, start_bot, start_worker, sessions):
    w, server = world, world.server
    bot = await start_bot()
    await start_worker(films=["qiqi"])  # ponyo has no worker: its turns stay queued
    await setup_game(w)
    await say(w, w.bob, "game join", {"character": "jiji"})
    await say(w, w.erin, "admin film", {"film": "ponyo", "scope": "channel"}, channel=w.games2)
    await say(w, w.alice, "game start", channel=w.games2)
    await say(w, w.alice, "game join", {"character": "ponyo"}, channel=w.games2)

    await say(w, w.alice, "act", {"motion": "fly on broomstick", "background": "sky"})
    await say(w, w.alice, "act", {"motion": "swim", "background": "sea"}, channel=w.games2)
    posted = await result(w, 1)
    queued = status_message(w, 1, w.games2)
    turns = {t.session_id: t for t in await turns_of(sessions)}
    qiqi_turn, ponyo_turn = sorted(turns.values(), key=lambda t: t.id)
    assert queued.custom_ids == [f"ag:cancel:{ponyo_turn.id}"] and posted.custom_ids == [f"ag:regen:{qiqi_turn.id}"]

    # someone else's turn: refused, before and after a restart
    h = await server.click(queued, w.bob, f"ag:cancel:{ponyo_turn.id}")
    assert "Only alice (who asked for this turn) or a moderator can cancel it" in (await h.wait_followup(timeout=15)).content
    await stop_bot(w, bot)
    await start_bot()
    h = await server.click(posted, w.bob, f"ag:regen:{qiqi_turn.id}")
    assert "or a moderator can regenerate it" in (await h.wait_followup(timeout=15)).content

    h = await server.click(queued, w.alice, f"ag:cancel:{ponyo_turn.id}")
    assert (await h.wait_followup(timeout=15)).content == "Turn #1 is cancelled."
    queued = await closed_as(w, 1, "cancelled", w.games2)
    async with sessions() as s:
        assert (await s.scalar(text("SELECT status FROM procrastinate_jobs WHERE id = :id"), {"id": ponyo_turn.job_id})) == "cancelled"

    h = await server.click(posted, w.alice, f"ag:regen:{qiqi_turn.id}")
    assert "generated again with a new seed" in (await h.wait_followup(timeout=15)).content
    again = await server.wait_for_message(w.games, lambda m: is_result(m, 1), after=posted, timeout=30)
    await wait_until(lambda: _posted_as(sessions, qiqi_turn.id, again.id), timeout=10)
    assert server.messages[posted.id].components == []  # the old take keeps its clip, loses its button
    (redo,) = [t for t in await turns_of(sessions) if t.id == qiqi_turn.id]
    assert redo.seed != qiqi_turn.seed and redo.posted_message_id == again.id
    # the first take's effect was undone before the second was applied
    assert redo.states_before["qiqi"] == {"stamina": STATE_START, "social": STATE_START, "entertainment": STATE_START}
    assert field(again.embeds[0], "Qiqi") != "" and again.attachments[0].data == redo.mp4

    # only the latest turn can be regenerated; a moderator may regenerate anyone's
    await say(w, w.bob, "act", {"motion": "talk", "background": "bakery"})
    second = await result(w, 2)
    h = await server.click(again, w.alice, f"ag:regen:{qiqi_turn.id}")
    assert "Only the game's latest turn (#2) can be regenerated" in (await h.wait_followup(timeout=15)).content
    h = await server.click(second, w.dave, second.custom_ids[0])
    assert "generated again" in (await h.wait_followup(timeout=15)).content
    await server.wait_for_message(w.games, lambda m: is_result(m, 2), after=second, timeout=30)
    assert ("regenerate_turn", "dave") in await audit_actions(sessions)
    assert server.unhandled == []


async def test_status_message_whose_recording_was_lost_becomes_the_post(world, start_bot, start_worker, sessions):
    """The bot died between Discord creating the status message and the database recording it:
    the notifier finds that message in the channel and edits it into the post (one message)."""
    w, server = world, world.server
    turn = await _one_turn_queued_while_the_bot_is_down(w, start_bot, sessions)
    status_id = turn.status_message_id
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == turn.id).values(status_message_id=None))

    await start_worker(films=["qiqi"])
    await start_bot()
    posted = await result(w, 1)
    (turn,) = await posted_turns(sessions, 1)
    assert posted.id == status_id == turn.posted_message_id
    assert result_posts(server, turn.id) == [] and len(results(w)) == 1
