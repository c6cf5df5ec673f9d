"""Live updates for the play page: the database's NOTIFYs, fanned out to every open tab.

One LISTEN connection serves all tabs. Only events of the play page's channel go out. If the
connection drops, the hub reconnects and tells each tab to re-read everything (`resync`), since
NOTIFYs sent meanwhile are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

import asyncpg

from db import notify
from db.engine import libpq_url

log = logging.getLogger(__name__)

# Channel names as the page knows them ("turn_finished" ...).
SHORT = {ch: ch.removeprefix("animegamer_") for ch in notify.CHANNELS}
RESYNC = {"type": "resync"}


class Subscriber:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict | None] = asyncio.Queue(maxsize=500)

    def put(self, event: dict | None) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:  # a stalled tab: drop its backlog and make it re-read
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(RESYNC)


class EventHub:
    def __init__(self, url: str, channel_id: int, *, retry_seconds: float = 1.0) -> None:
        self.url = libpq_url(url)
        self.channel_id = channel_id
        self.retry_seconds = retry_seconds
        self.subscribers: set[Subscriber] = set()
        self._task: asyncio.Task | None = None
        self.connected = asyncio.Event()

    def subscribe(self) -> Subscriber:
        sub = Subscriber()
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)

    def publish(self, event: dict | None) -> None:
        for sub in list(self.subscribers):
            sub.put(event)

    def _on_notify(self, _conn, _pid, channel: str, payload: str) -> None:
        try:
            data = notify.parse(payload)
        except (ValueError, TypeError):
            log.warning("ignoring a malformed %s payload: %r", channel, payload)
            return
        if data.get("channel_id") != self.channel_id:
            return
        self.publish({"type": SHORT.get(channel, channel), **data})

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="play-events")
        # Listening before the page is served, so no early event is lost.
        await asyncio.wait_for(self.connected.wait(), timeout=30)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.publish(None)  # ends every open event stream

    async def _run(self) -> None:
        first = True
        while True:
            conn = None
            try:
                conn = await asyncpg.connect(self.url)
                lost = asyncio.Event()
                conn.add_termination_listener(lambda _c: lost.set())
                for ch in notify.CHANNELS:
                    await conn.add_listener(ch, self._on_notify)
                self.connected.set()
                if not first:
                    self.publish(RESYNC)
                first = False
                await lost.wait()
                log.warning("the play page's LISTEN connection closed; reconnecting")
            except asyncio.CancelledError:
                raise
            except (OSError, asyncpg.PostgresError) as e:
                log.warning("play page LISTEN connection failed (%s); retrying", e)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(conn.close(timeout=2))
            await asyncio.sleep(self.retry_seconds)


def sse_frame(event: dict) -> bytes:
    return f"data: {json.dumps(event, separators=(',', ':'))}\n\n".encode()
