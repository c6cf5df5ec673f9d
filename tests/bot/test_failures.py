"""When things go wrong: a failed turn, clips over the upload limit, the database or the queue down."""

from __future__ import annotations

from sqlalchemy import func, select

from db.engine import make_engine
from db.migrate import upgrade
from db.models import GameSession, Turn
from db.runtime import open_database
from inference.backend import BackendError
from inference.backends.preview import PreviewBackend
from testkit.pg import fresh_database
from tests.bot.conftest import stop_bot
from tests.bot.helpers import field, patches_with_files, posted_turns, result, say, setup_game, turn_messages

NOT_REACHABLE = "is not reachable right now. Nothing was changed; please try again shortly."


class ExplodingPreview(PreviewBackend):
    """The preview backend, except that it fails on the motion "explode" like a GPU out of memory."""

    def generate(self, request, progress):
        if "explode" in request.motion:
            progress(0.3, "mllm")
            raise BackendError("The generator ran out of GPU memory; try again in a moment.")
        return super().generate(request, progress)


async def test_failed_turn_is_announced_with_its_reason(world, start_bot, start_worker, sessions):
    w = world
    await start_bot()
    await start_worker(films=["qiqi"], backend=ExplodingPreview(width=96, height=64))
    await setup_game(w)

    await say(w, w.alice, "act", {"motion": "explode", "background": "town"})
    failed = await result(w, 1)
    embed = failed.embeds[0]
    assert embed["title"] == "Turn #1 failed" and failed.attachments == []
    assert field(embed, "Reason") == "The generator reported: The generator ran out of GPU memory; try again in a moment."
    assert "characters are unchanged" in embed["footer"]["text"]
    # one message for the turn: its status message became the failure's post
    assert turn_messages(w, 1) == [failed]
    (t1,) = await posted_turns(sessions, 1)
    assert failed.id == t1.status_message_id == t1.posted_message_id

    # the next turn plays on from the unchanged states; the failed one can be tried again
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    ok = await result(w, 2)
    (t1, t2) = await posted_turns(sessions, 2)
    assert t1.status == "failed" and t2.status == "done"
    assert t2.states_before["qiqi"] == {"stamina": 50, "social": 50, "entertainment": 50}
    assert ok.attachments[0].data == t2.mp4


async def test_clips_over_the_upload_limit(world, start_bot, start_worker, sessions):
    w, server = world, world.server
    await start_bot()
    await start_worker(films=["qiqi"])
    await setup_game(w)

    # the limit the bot learnt from the interaction is below the clip: the embed says so
    w.guild.upload_limit = 2048
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    first = await result(w, 1)
    (t1,) = await posted_turns(sessions, 1)
    assert t1.mp4_size > 2048 and first.attachments == []
    assert field(first.embeds[0], "Clip") == f"The clip ({round(t1.mp4_size / 1024)} KB) is larger than this server's upload limit (2 KB), so it is not attached."

    # the server's limit drops after the bot last saw it: Discord answers 413, the turn is still posted
    w.guild.upload_limit = 10 * 1024 * 1024
    await say(w, w.alice, "act", {"motion": "run", "background": "town"})
    w.guild.upload_limit = 2048
    second = await result(w, 2)
    assert second.attachments == [] and "larger than this server's upload limit" in field(second.embeds[0], "Clip")
    assert [r.status for r in patches_with_files(server)] == [413]  # the status message's edit into the post
    assert turn_messages(w, 2) == [second]

    # /export: stitched within the interaction's limit, or refused with what to do
    assert "does not fit this server's upload limit (2 KB)" in await say(w, w.alice, "export")
    w.guild.upload_limit = 10 * 1024 * 1024
    h = await server.slash(w.guild, w.games, w.alice, "export")
    m = await h.wait_followup(timeout=30)
    assert "2 shots, turns #1 to #2" in m.content and m.attachments[0].size <= 10 * 1024 * 1024


async def test_database_down_gives_a_clear_message(world, start_bot, qsettings):
    w = world
    async with open_database(qsettings, url="postgresql://postgres@127.0.0.1:9/nowhere") as down:
        await start_bot(db=down)
        assert NOT_REACHABLE in await say(w, w.alice, "game start")
        assert NOT_REACHABLE in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
        assert NOT_REACHABLE in await say(w, w.carol, "admin show")  # the rights check needs the database too
        assert w.server.channel_messages(w.games) == []


async def test_queue_down_writes_nothing(world, start_bot, qsettings):
    """A database without the job queue's tables: deferring fails, and the turn is not inserted."""
    w = world
    with fresh_database() as url:
        engine = make_engine(url)
        await upgrade(engine)  # every app table (later revisions add some), then no queue
        async with engine.begin() as conn:
            await conn.exec_driver_sql("DROP TABLE procrastinate_jobs, procrastinate_events, procrastinate_periodic_defers, procrastinate_workers CASCADE")
        await engine.dispose()
        async with open_database(qsettings, url=url) as db:
            bot = await start_bot(db=db)
            await setup_game(w)
            text = await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
            assert text == f"Sorry, the generation queue {NOT_REACHABLE}"
            async with db.sessions() as s:
                assert await s.scalar(select(func.count()).select_from(Turn)) == 0
                assert (await s.scalars(select(GameSession))).one().next_seq == 1
            assert [m for m in w.server.channel_messages(w.games) if m.embeds] == []
            await stop_bot(w, bot)
