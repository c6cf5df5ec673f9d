"""LISTEN for the app's NOTIFY channels (db.notify) on a dedicated asyncpg connection.

    async with Listener(url, [notify.TURN_FINISHED, notify.TURN_PROGRESS], on_connect=sweep) as listener:
        async for channel, payload in listener:
            ...

The connection is re-opened when it drops (checked with a keepalive query when idle), for as
long as it takes: capped exponential backoff with jitter (db.transient.backoff), so a database
restart or a long outage never ends the iteration. `connected` is clear meanwhile and
`reconnects` counts the re-openings. `on_connect` runs after every (re)connection, once LISTEN is
in place, so the caller can sweep for rows whose NOTIFY it missed while disconnected (an error in
it is logged, never fatal). Payloads are parsed JSON objects.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple

import asyncpg

from db.engine import libpq_url
from db.transient import backoff, classify

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
        reconnect_delay: float = 0.5,
        max_reconnect_delay: float = 10.0,
    ) -> None:
        self.url = libpq_url(url)
        self.channels = tuple(channels)
        self.on_connect = on_connect
        self.keepalive = keepalive
        self.reconnect_delay = reconnect_delay
        self.max_reconnect_delay = max_reconnect_delay
        self.connected = asyncio.Event()
        self.reconnects = 0
        self._conn: asyncpg.Connection | None = None
        self._queue: asyncio.Queue[Notification | object] = asyncio.Queue()  # or _DROPPED
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
            try:
                await self.on_connect()
            except asyncio.CancelledError:
                raise
            except Exception:  # e.g. the catch-up sweep met the database going away again
                log.warning("LISTEN on_connect hook failed", exc_info=True)

    async def _reconnect(self) -> None:
        self.connected.clear()
        self._drop_connection()
        delays = backoff(self.reconnect_delay, self.max_reconnect_delay)
        while not self._closed:
            try:
                await asyncio.wait_for(self._connect(), 30)
                self.reconnects += 1
                log.info("LISTEN connection re-opened")
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # transient or not, a listener keeps trying: it must outlive the outage
                delay = next(delays)
                log.warning("LISTEN reconnect failed (%s: %s); next try in %.1f s", classify(e) or type(e).__name__, e, delay)
                await asyncio.sleep(delay)

    def __aiter__(self) -> Listener:
        return self

    async def __anext__(self) -> Notification:
        while not self._closed:
            try:
                item = await asyncio.wait_for(self._queue.get(), self.keepalive)
            except TimeoutError:
                item = None
                try:
                    if self._conn is None:
                        raise ConnectionError("no connection")
                    await asyncio.wait_for(self._conn.fetchval("SELECT 1"), self.keepalive)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    item = _DROPPED
            if item is _DROPPED:
                if not self._closed:
                    log.warning("LISTEN connection lost; reconnecting")
                    await self._reconnect()
                continue
            if isinstance(item, Notification):
                return item
        raise StopAsyncIteration

    async def next(self, timeout: float | None = None) -> Notification:
        """The next notification, or TimeoutError after `timeout` seconds."""
        return await asyncio.wait_for(self.__anext__(), timeout)
