"""Fixtures for the fake Discord's own tests. Other suites can import them:

    from tests.fake_discord.conftest import fake_discord  # noqa: F401
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .server import FakeDiscord


@pytest.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    """A started FakeDiscord, fresh for each test."""
    async with FakeDiscord() as server:
        yield server
    assert not server.unhandled, f"requests to routes the fake lacks: {server.unhandled}"
