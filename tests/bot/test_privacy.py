"""/privacy show and /privacy delete through Discord, and the bot's departures from a server:
the real client against the fake Discord, a real Postgres and preview workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select, text

from db import privacy
from db.models import GameSession, GuildDeparture, GuildSettings, Player, PrivacyRequest, Turn
from testkit.queue import wait_until
from tests.bot.helpers import answer, command, field, posted_turns, result, say, setup_game, status_message


async def _show(w, member) -> dict:
    h, _ = await command(w, member, "privacy show")
    _, embeds, ephemeral = await answer(h)
    assert ephemeral
    return embeds[0]


async def _confirm_delete(w, member):
    """/privacy delete, then its button; returns the confirmation's message once answered."""
    h, _ = await command(w, member, "privacy delete")
    ask = await h.wait_original()
    assert ask.ephemeral and "every server" in ask.embeds[0]["description"]
    (custom_id,) = ask.custom_ids
    assert custom_id == f"ag:privacy:delete:{member.id}"
    other = await w.server.click(ask, w.bob if member is not w.bob else w.carol, custom_id)
    assert "for the member who asked" in ((await other.wait_response()).content or "")
    click = await w.server.click(ask, member, custom_id)
    assert (await click.wait_response()).type == 7  # the ephemeral message is updated: no button left
    return ask


async def _requests_done(sessions, timeout: float = 20.0) -> None:
    async def done():
        async with sessions() as s:
            left = await s.scalar(select(func.count()).select_from(PrivacyRequest).where(PrivacyRequest.status == "pending"))
            total = await s.scalar(select(func.count()).select_from(PrivacyRequest))
        return total and not left

    await wait_until(done, timeout=timeout)


async def test_show_then_delete_everywhere(world, start_bot, start_worker, sessions):
    w = world
    await start_bot()
    await start_worker()
    await setup_game(w, (w.alice, "qiqi"), (w.bob, "jiji"))
    await say(w, w.alice, "act", {"motion": "secretly dance", "background": "bakery"})
    await result(w, 1)
    await say(w, w.bob, "act", {"motion": "walk", "background": "town"})
    await result(w, 2)
    await posted_turns(sessions, 2)

    shown = await _show(w, w.alice)
    assert field(shown, "In this server") == "1 game joined, 1 turn (1 clip still stored), 0 votes and proposals, 0 audit entries"
    assert field(shown, "In all servers (1)").startswith("1 game joined")
    assert field(await _show(w, w.carol), "In this server") == "nothing"

    ask = await _confirm_delete(w, w.alice)
    await _requests_done(sessions)
    assert "being deleted" in ask.content and ask.components == []

    async with sessions() as s:
        rows = (await s.scalars(select(Turn).order_by(Turn.seq))).all()
        assert [(t.seq, t.author_name) for t in rows] == [(1, privacy.DELETED_NAME), (2, "bob")]
        assert rows[0].author_id < 0 and rows[0].instruction == "" and await s.scalar(select(Turn.mp4).where(Turn.id == rows[0].id)) is None
        assert await s.scalar(select(Turn.mp4).where(Turn.id == rows[1].id))
        assert [p.user_name for p in (await s.scalars(select(Player))).all()] == ["bob"]
        assert (await s.scalar(select(GameSession.created_by))) < 0  # alice started the game
    # Discord: her shot's post is a notice now; bob's is as it was
    async def cleared():
        return status_message(w, 1).embeds[0]["title"] == "Turn #1 · removed"

    await wait_until(cleared, timeout=10)
    gone = status_message(w, 1)
    assert gone.attachments == [] and gone.components == [] and "secretly" not in str(gone.embeds)
    assert (await result(w, 2)).attachments
    assert field(await _show(w, w.alice), "In all servers (0)") == "nothing"

    # the game goes on for bob, numbered after her anonymous turn; alice may join again as anyone
    await say(w, w.bob, "act", {"motion": "run", "background": "town"})
    await result(w, 3)
    assert "You play Qiqi" in await say(w, w.alice, "game join", {"character": "qiqi"})


async def test_delete_while_her_turn_is_generated(world, start_bot, start_worker, sessions):
    """The worker is generating alice's turn when her deletion runs: once it finishes, nothing
    of hers comes back (no clip stored, nothing posted with her text or name)."""
    w = world
    await start_bot()
    await start_worker(backend_options={"delay": 3.0})
    await setup_game(w, (w.alice, "qiqi"))
    await say(w, w.alice, "act", {"motion": "secretly sing", "background": "bakery"})

    async def running():
        async with sessions() as s:
            return await s.scalar(select(Turn.status)) == "running"

    await wait_until(running, timeout=15)
    await _confirm_delete(w, w.alice)
    await _requests_done(sessions)

    async def worker_done():
        async with sessions() as s:
            jobs = (await s.execute(text("SELECT status FROM procrastinate_jobs"))).scalars().all()
        return jobs and all(j not in ("todo", "doing") for j in jobs)

    await wait_until(worker_done, timeout=20)
    async with sessions() as s:
        t = (await s.scalars(select(Turn))).one()
        assert t.status == "cancelled" and t.author_name == privacy.DELETED_NAME and t.instruction == ""
        assert await s.scalar(select(Turn.mp4).where(Turn.id == t.id)) is None
    for m in w.server.channel_messages(w.games):
        assert not m.attachments and "secretly" not in str(m.embeds) and "alice" not in str(m.embeds), m.embeds


async def test_server_data_deleted_after_the_bot_left_unless_back(world, start_bot, sessions):
    w, server = world, world.server
    bot = await start_bot()
    await setup_game(w, (w.alice, "qiqi"))
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})  # no worker: it stays queued
    elsewhere = 987654321098765432  # a server that removed the bot while it was offline: no GUILD_DELETE came
    async with sessions.begin() as s:
        s.add_all([GuildSettings(guild_id=elsewhere), GuildSettings(guild_id=1)])  # 1: the play page's guild
    assert await bot.maintenance.departed() == []
    async with sessions() as s:
        assert list((await s.scalars(select(GuildDeparture.guild_id))).all()) == [elsewhere]
        await s.execute(delete(GuildDeparture).where(GuildDeparture.guild_id == elsewhere))
        await s.execute(delete(GuildSettings).where(GuildSettings.guild_id == elsewhere))
        await s.commit()

    async def departure():
        async with sessions() as s:
            return await s.get(GuildDeparture, w.guild.id)

    server.remove_bot(w.guild)
    first = await wait_until(departure, timeout=5)
    assert first.delete_after - first.left_at == timedelta(days=30)  # ANIMEGAMER_GUILD_DATA_DAYS
    server.add_bot(w.guild)  # added back: nothing is deleted

    async def cancelled():
        return await departure() is None

    await wait_until(cancelled, timeout=5)
    assert await bot.maintenance.departed(now=datetime.now(UTC) + timedelta(days=31)) == []

    server.remove_bot(w.guild)
    await wait_until(departure, timeout=5)
    assert await bot.maintenance.departed(now=datetime.now(UTC) + timedelta(days=29)) == []  # not yet
    assert await bot.maintenance.departed(now=datetime.now(UTC) + timedelta(days=31)) == [w.guild.id]
    async with sessions() as s:
        for table in ("game_sessions", "turns", "players", "audit_log", "guild_departures"):
            assert await s.scalar(text(f"SELECT count(*) FROM {table}")) == 0, table
        assert list((await s.scalars(select(GuildSettings.guild_id))).all()) == [1]  # the play page's stays
        jobs = (await s.execute(text("SELECT status FROM procrastinate_jobs"))).scalars().all()
        assert jobs == ["cancelled"]  # the queued turn's job went with it


async def test_delete_during_a_vote_round(world, start_bot, sessions):
    """Her proposal leaves the open round (with the votes for it) and the round's message shows
    the round without her."""
    from tests.bot.test_vote import round_message, setup_vote_game, wait_round

    w = world
    await start_bot()
    await setup_vote_game(w)
    await say(w, w.alice, "vote propose", {"motion": "secretly dance", "background": "bakery"})
    await say(w, w.bob, "vote propose", {"motion": "walk", "background": "town"})
    await wait_round(w, "Vote · open", n_buttons=2)
    assert "alice" in str(round_message(w).embeds)

    await _confirm_delete(w, w.alice)
    await _requests_done(sessions)

    async def without_her():
        m = round_message(w)
        return len(m.custom_ids) == 1 and "alice" not in str(m.embeds) and "secretly" not in str(m.embeds)

    await wait_until(without_her, timeout=10)
    assert "bob" in str(round_message(w).embeds)
