"""Fixtures for the fake Discord's own tests: the server, its guild (tinybot.World) and the tiny
bot logged in to it. Other suites can import the server's:

    from tests.fake_discord.conftest import fake_discord  # noqa: F401
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from testkit.fake_discord.client import running_client
from testkit.fake_discord.server import FakeDiscord
from testkit.fake_discord.tinybot import Recorder, TinyBot, World, build_world


@pytest.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    """A started FakeDiscord, fresh for each test."""
    async with FakeDiscord() as server:
        yield server
    assert not server.unhandled, f"requests to routes the fake lacks: {server.unhandled}"


@pytest.fixture
def world(fake_discord: FakeDiscord) -> World:
    return build_world(fake_discord)


@pytest.fixture
async def bot(fake_discord: FakeDiscord, world: World):
    rec = Recorder()
    async with running_client(fake_discord, TinyBot(rec)) as client:
        await client.tree.sync()
        yield client
