"""End-to-end fixtures: the real bot (discord.py) against the fake Discord, a real Postgres, and
real in-process workers on the preview backend (tests.queue's `start_worker`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import discord
import pytest_asyncio

from bot.client import AnimeGamerBot
from db.runtime import open_database
from service.runtime import Store
from testkit.fake_discord import (
    FakeChannel,
    FakeDiscord,
    FakeGuild,
    FakeMember,
    FakeRole,
    patch_discord,
    start_client,
    stop_client,
)
from tests.queue.conftest import qsettings, start_worker  # noqa: F401  (fixtures shared with the queue tests)


@dataclass
class World:
    server: FakeDiscord
    guild: FakeGuild
    games: FakeChannel
    games2: FakeChannel
    admin_role: FakeRole  # no Discord permission; given admin rights in the bot by /admin role
    mod_role: FakeRole
    owner: FakeMember  # owner: every permission
    alice: FakeMember
    bob: FakeMember
    carol: FakeMember  # no rights at all
    dave: FakeMember  # Manage Messages: a moderator
    erin: FakeMember  # Manage Server: an admin
    bots: list = field(default_factory=list)


@pytest_asyncio.fixture
async def world():
    async with FakeDiscord() as server:
        g = server.create_guild("AnimeGamer Test")
        w = World(
            server=server,
            guild=g,
            games=g.create_text_channel("games"),
            games2=g.create_text_channel("games-2"),
            admin_role=g.create_role("Game Admins"),
            mod_role=g.create_role("Game Mods"),
            owner=g.owner,
            alice=g.create_member("alice"),
            bob=g.create_member("bob"),
            carol=g.create_member("carol"),
            dave=g.create_member("dave", roles=[g.create_role("Discord Mods", permissions=discord.Permissions(manage_messages=True))]),
            erin=g.create_member("erin", roles=[g.create_role("Discord Admins", permissions=discord.Permissions(manage_guild=True))]),
        )
        with patch_discord(server):
            yield w
            for bot, task in w.bots:
                if not bot.is_closed():
                    await stop_client(bot, task)
        # The fake serves only the routes the bot uses: a new call needs a handler there (@route).
        assert not server.unhandled, f"the bot called routes the fake Discord lacks: {server.unhandled}"


@pytest_asyncio.fixture
async def bot_db(qsettings, sessions):  # noqa: F811  (sessions: app and queue tables emptied first)
    async with open_database(qsettings) as db:
        yield db


@pytest_asyncio.fixture
async def start_bot(world, bot_db, qsettings):  # noqa: F811
    """start_bot(**kw) -> a running AnimeGamerBot; stop_bot(bot) closes it (a restart = stop + start)."""
    synced = False

    async def start(db=None, settings=None, **kw) -> AnimeGamerBot:
        """db: an open db.runtime.Database (default: the test database), held as the service's Store."""
        nonlocal synced
        kw.setdefault("sweep_seconds", 1.0)
        bot = AnimeGamerBot(settings or qsettings, Store(db or bot_db), guild_ready_timeout=0.05, **kw)
        task = await start_client(world.server, bot)
        world.bots.append((bot, task))
        if not synced:
            await bot.tree.sync()
            synced = True
        return bot

    yield start


async def stop_bot(world: World, bot) -> None:
    for b, task in world.bots:
        if b is bot:
            with contextlib.suppress(Exception):
                await stop_client(b, task)
