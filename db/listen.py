"""LISTEN for the app's NOTIFY channels (db.notify) on a dedicated asyncpg connection.

    async with Listener(url, [notify.TURN_FINISHED, notify.TURN_PROGRESS], on_connect=sweep) as listener:
        async for channel, payload in listener:
            ...

The connection is re-opened when it drops (checked with a keepalive query when idle);
`on_connect` runs after every (re)connection, once LISTEN is in place, so the caller can sweep
for rows whose NOTIFY it missed while disconnected. Payloads are parsed JSON objects.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple

import asyncpg

from db.engine import libpq_url

log = logging.getLogger(__name__)

_DROPPED = object()  # queue marker: the connection ended


class Notification(NamedTuple):
    channel: str
    payload: dict


class Listener:
    def __init__(
        self,
        url: str,
        channels: Iterable[str],
        *,
        on_connect: Callable[[], Awaitable[None]] | None = None,
        keepalive: float = 15.0,
        reconnect_delay: float = 1.0,
        max_reconnect_delay: float = 30.0,
    ) -> None:
        self.url = libpq_url(url)
        self.channels = tuple(channels)
        self.on_connect = on_connect
        self.keepalive = keepalive
        self.reconnect_delay = reconnect_delay
        self.max_reconnect_delay = max_reconnect_delay
        self.connected = asyncio.Event()
        self._conn: asyncpg.Connection | None = None
        self._queue: asyncio.Queue = asyncio.Queue()
        self._closed = False

    async def __aenter__(self) -> Listener:
        await self._connect()  # the first connection fails loudly (a wrong URL is a setup error)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self.connected.clear()
        self._drop_connection()
        self._queue.put_nowait(_DROPPED)  # wakes a reader blocked in __anext__

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.remove_termination_listener(self._on_terminate)  # our own close is no drop
            conn.terminate()

    def _on_notify(self, conn, pid, channel, payload) -> None:
        try:
            data = json.loads(payload) if payload else {}
            if not isinstance(data, dict):
                data = {"value": data}
        except ValueError:
            data = {"raw": payload}
        self._queue.put_nowait(Notification(channel, data))

    def _on_terminate(self, conn) -> None:
        self._queue.put_nowait(_DROPPED)

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self.url)
        try:
            for ch in self.channels:
                await conn.add_listener(ch, self._on_notify)
            conn.add_termination_listener(self._on_terminate)
        except BaseException:
            conn.terminate()
            raise
        self._conn = conn
        self.connected.set()
        if self.on_connect is not None:
            await self.on_connect()

    async def _reconnect(self) -> None:
        self.connected.clear()
        self._drop_connection()
        delay = self.reconnect_delay
        while not self._closed:
            try:
                await self._connect()
                log.info("LISTEN connection re-opened")
                return
            except (OSError, asyncpg.PostgresError, asyncio.TimeoutError) as e:
                log.warning("LISTEN reconnect failed (%s); next try in %.0f s", e, delay)
                await asyncio.sleep(delay)
                delay = min(self.max_reconnect_delay, delay * 2)

    def __aiter__(self) -> Listener:
        return self

    async def __anext__(self) -> Notification:
        while not self._closed:
            try:
                item = await asyncio.wait_for(self._queue.get(), self.keepalive)
            except asyncio.TimeoutError:
                item = None
                try:
                    await asyncio.wait_for(self._conn.fetchval("SELECT 1"), self.keepalive)
                except Exception:
                    item = _DROPPED
            if item is _DROPPED:
                if not self._closed:
                    log.warning("LISTEN connection lost; reconnecting")
                    await self._reconnect()
                continue
            if item is not None:
                return item
        raise StopAsyncIteration

    async def next(self, timeout: float | None = None) -> Notification:
        """The next notification, or TimeoutError after `timeout` seconds."""
        return await asyncio.wait_for(self.__anext__(), timeout)
