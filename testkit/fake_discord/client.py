"""Pointing the real discord.py client at a FakeDiscord, and running it inside a test."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import TypeVar

import discord
import discord.gateway
import discord.http
import yarl

from testkit.waits import wait_for

from .server import FakeDiscord

ClientT = TypeVar("ClientT", bound=discord.Client)


@contextlib.contextmanager
def patch_discord(server: FakeDiscord) -> Iterator[None]:
    """Point discord.py's REST base and default gateway at `server`; restore both on exit.

    These are the only two hooks: discord.http.Route.BASE (read whenever a Route is built, so set
    it after any discord.http._set_api_version call) and DiscordWebSocket.DEFAULT_GATEWAY (used for
    the first connect and after an invalidated session; READY's resume_gateway_url covers resumes).
    Interaction callbacks and webhooks go through Route too, so they follow.
    """
    old_base = discord.http.Route.BASE
    old_gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = server.api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(server.gateway_url)
    try:
        yield
    finally:
        discord.http.Route.BASE = old_base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = old_gateway


async def start_client(server: FakeDiscord, client: ClientT, *, timeout: float = 10.0) -> asyncio.Task[None]:
    """Start `client` against `server` and wait until on_ready; returns the task running it.

    URLs must already be patched (see patch_discord). If the client dies while starting, its
    exception is raised here instead of a timeout.
    """
    task = asyncio.create_task(client.start(server.token), name="fake-discord-client")

    def ready() -> bool:
        if task.done():
            task.result()  # re-raise the start failure
            raise RuntimeError("client.start() returned before READY")
        return client.is_ready()

    # wait_until_ready() cannot be awaited before login() set the client up, so poll.
    try:
        await wait_for(ready, timeout, interval=0.01, what="the client's READY")
    except AssertionError:
        task.cancel()
        raise TimeoutError(f"client not ready after {timeout}s; gateway log: {server.gateway.log}") from None
    return task


async def stop_client(client: discord.Client, task: asyncio.Task[None], *, timeout: float = 10.0) -> None:
    """Close the client (gateway close 1000 ends its session) and wait for its task."""
    await client.close()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout)


@contextlib.asynccontextmanager
async def running_client(server: FakeDiscord, client: ClientT, *, timeout: float = 10.0) -> AsyncIterator[ClientT]:
    """``async with running_client(server, bot) as bot:`` - patched URLs, started, READY, closed after.

    Build the client with ``guild_ready_timeout=0.05`` (or similar): discord.py otherwise waits
    2 s after the last GUILD_CREATE before firing on_ready.
    """
    with patch_discord(server):
        task = await start_client(server, client, timeout=timeout)
        try:
            yield client
        finally:
            await stop_client(client, task, timeout=timeout)
