"""Autocomplete and rights checks answer from the bot's cache: no query per keystroke; a write
(here or in another process) is seen at once."""

from __future__ import annotations

import asyncio
import contextlib

from sqlalchemy import event

from db import guilds, notify
from db import sessions as game_sessions
from game.catalogue import FILMS
from testkit.waits import wait_for
from tests.bot.helpers import say

RIGHTS = "You need the Manage Messages permission or the bot's moderator role"


@contextlib.contextmanager
def counted_queries(engine):
    """Statements the engine sends while the block runs."""
    seen: list[str] = []

    def count(conn, cursor, statement, *args):
        seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)


async def bot_world_wait(predicate, timeout: float = 10.0) -> None:
    await wait_for(predicate, timeout, interval=0.02, what="the bot handled the marker NOTIFY")


async def settled(bot, sessions) -> None:
    """Wait until the bot has handled every NOTIFY sent so far: they arrive in order, so once a
    marker sent now is handled, the earlier ones (which drop cache entries) are too."""
    seen: list = []
    handle = bot.config.config_changed

    def spy(guild_id):
        seen.append(guild_id)
        handle(guild_id)

    bot.config.config_changed = spy
    try:
        async with sessions.begin() as s:
            await notify.notify(s, notify.CONFIG_CHANGED, guild_id=0)
        await bot_world_wait(lambda: 0 in seen)
    finally:
        bot.config.config_changed = handle


async def choices(w, member, command: str, options: dict, focused: str) -> list[str]:
    h = await w.server.autocomplete(w.guild, w.games, member, command, options, focused=focused)
    return [c["name"] for c in (await h.wait_response()).choices]


async def test_keystrokes_do_not_query_and_writes_are_seen(world, start_bot, bot_db, sessions, qsettings):
    w = world
    bot = await start_bot(sweep_seconds=3600)  # no periodic sweep: every query counted is the cache's
    await asyncio.wait_for(bot.notifier.listening.wait(), 10)  # (re)connecting LISTEN empties the cache
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start")
    await say(w, w.alice, "game join", {"character": "qiqi"})
    await settled(bot, sessions)
    assert "Jiji" in await choices(w, w.bob, "game join", {"character": ""}, "character")  # warms the cache

    with counted_queries(bot_db.engine) as queries:
        for typed in ("f", "fl", "fly", "fly ", "fly o"):
            assert (await choices(w, w.alice, "act", {"motion": typed}, "motion"))[0] == "fly on broomstick"
        for typed in ("J", "Ji", "Jij"):
            assert await choices(w, w.alice, "act", {"motion": "x", "with": typed}, "with") == ["Jiji"]
        assert "Qiqi (played by alice)" in await choices(w, w.bob, "game join", {"character": ""}, "character")
        assert RIGHTS in await say(w, w.carol, "mod pause")  # the rights check reads the cached roles
    assert queries == [], queries

    # A write through the bot is seen by the next keystroke.
    assert "Jiji" not in await say(w, w.erin, "admin character", {"character": "jiji", "enabled": False})
    assert "Jiji" not in await choices(w, w.bob, "game join", {"character": ""}, "character")
    await say(w, w.erin, "admin role", {"kind": "moderator", "role": w.mod_role})
    mo = w.guild.create_member("mo", roles=[w.mod_role])
    assert "paused" in await say(w, mo, "mod pause")

    # A write by another process reaches the cache through NOTIFY; so does a new game's film.
    async with sessions.begin() as s:
        await guilds.set_playable(s, w.guild.id, w.games.id, [c.id for c in FILMS["qiqi"].characters])  # Jiji back
    await w.server.wait_until(lambda: bot.config._configs == {}, timeout=5, what="the cache to drop the guild")
    assert "Jiji" in await choices(w, w.bob, "game join", {"character": ""}, "character")
    h = await w.server.autocomplete(w.guild, w.games2, w.bob, "game join", {"character": "sosu"}, focused="character")
    assert (await h.wait_response()).choices == []  # no game there: the server's film (Qiqi's cast)
    async with sessions.begin() as s:
        await game_sessions.start_session(s, w.guild.id, w.games2.id, FILMS["ponyo"], created_by=None)
    await w.server.wait_until(lambda: w.games2.id not in bot.config._games, timeout=5, what="the cache to drop the channel")
    h = await w.server.autocomplete(w.guild, w.games2, w.bob, "game join", {"character": "sosu"}, focused="character")
    assert [c["name"] for c in (await h.wait_response()).choices] == ["Sosuke"]
