"""Live updates for the play page: the database's NOTIFYs, fanned out to every open tab.

One LISTEN connection (service.events) serves all tabs. Only events of the play page's channel go
out. When the connection is re-opened after a drop, each tab is told to re-read everything
(`resync`), since NOTIFYs sent meanwhile are lost.

A progress event that names a new preview of the clip (service.events.latest_still) goes out with the still
itself, as a data: URL read once for all tabs, so a tab shows it without a request of its own; a
still that cannot be read leaves the event without it (logged once per turn).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging

from service import events
from service.runtime import Store

log = logging.getLogger(__name__)

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
    """Reads the page channel's events (service.events) (their connection reconnects by itself) and fans them
    out to subscribers."""

    def __init__(self, url: str, channel_id: int, store: Store | None = None) -> None:
        """store: the database, to read previews (None: events without them)."""
        self.url = url
        self.channel_id = channel_id
        self.store = store
        self._preview_failed: set[int] = set()
        self.subscribers: set[Subscriber] = set()
        self._events: events.Events | None = None
        self._task: asyncio.Task | None = None
        self._connections = 0

    @property
    def listening(self) -> bool:
        """Whether live updates flow: the LISTEN connection is up (it reconnects by itself)."""
        return self._events is not None and self._events.connected

    def subscribe(self) -> Subscriber:
        sub = Subscriber()
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)

    def publish(self, event: dict | None) -> None:
        for sub in list(self.subscribers):
            sub.put(event)

    async def _on_connect(self) -> None:
        self._connections += 1
        if self._connections > 1:  # NOTIFYs sent while disconnected are lost: tabs re-read
            self.publish(RESYNC)

    async def start(self) -> None:
        # Listening before the page is served, so no early event is lost.
        self._events = events.Events(self.url, channel_id=self.channel_id, on_connect=self._on_connect)
        await self._events.open()
        self._task = asyncio.create_task(self._run(self._events), name="play-events")

    async def stop(self) -> None:
        if self._events is not None:
            await self._events.aclose()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.publish(None)  # ends every open event stream

    async def _run(self, stream: events.Events) -> None:
        async for e in stream:
            event = {"type": e.name, **e.payload}
            if e.name == events.TURN_PROGRESS and "preview" in event:
                event["preview_url"] = await self._preview(int(event["turn_id"]))
            self.publish(event)

    async def _preview(self, turn_id: int) -> str | None:
        """The turn's latest still as a data: URL, or None (none stored, or it cannot be read)."""
        if self.store is None:
            return None
        try:
            still = await events.latest_still(self.store, turn_id)
        except Exception:  # noqa: BLE001  (a preview is a courtesy)
            if turn_id not in self._preview_failed:
                self._preview_failed.add(turn_id)
                log.warning("turn %d: a preview could not be read; skipped (logged once per turn)", turn_id, exc_info=True)
            return None
        if still is None:
            return None
        return "data:image/webp;base64," + base64.b64encode(still).decode()


def sse_frame(event: dict) -> bytes:
    return f"data: {json.dumps(event, separators=(',', ':'))}\n\n".encode()
