"""Every game channel's events as they happen, from the database's NOTIFYs, for a face that
follows them all (the Discord bot: its notifier posts finished turns, its status board shows
progress and queue positions, its caches forget what changed). One LISTEN connection, which
reconnects by itself; `on_connect` runs after every (re)connection, since NOTIFYs sent while
disconnected are lost and a face sweeps for what it missed then."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import NamedTuple

from db import notify
from db.listen import Listener
from service.runtime import Store

# Event names as a face knows them: the NOTIFY channel without the app's prefix.
TURN_FINISHED = "turn_finished"  # done or failed: {"turn_id", "session_id", "channel_id", "status"}
TURN_PROGRESS = "turn_progress"  # {"turn_id", "session_id", "channel_id", "progress", "stage"[, "preview": its number]}
TURN_QUEUED = "turn_queued"  # queued, regenerated or cancelled: {"turn_id", "session_id", "channel_id"}
SESSION_CHANGED = "session_changed"  # {"session_id", "channel_id", "event"}
CONFIG_CHANGED = "config_changed"  # a server's or channel's settings written: {"guild_id"}
_NAMES = {
    notify.TURN_FINISHED: TURN_FINISHED, notify.TURN_PROGRESS: TURN_PROGRESS, notify.TURN_QUEUED: TURN_QUEUED,
    notify.SESSION_CHANGED: SESSION_CHANGED, notify.CONFIG_CHANGED: CONFIG_CHANGED,
}


class Event(NamedTuple):
    name: str  # one of the names above
    payload: dict


class Events:
    """`async with Events(store) as events: async for e in events: ...`; the first connection
    fails loudly (a wrong URL is a setup error), later drops reconnect."""

    def __init__(self, store: Store, *, on_connect: Callable[[], Awaitable[None]] | None = None) -> None:
        self._listener = Listener(store.url, list(_NAMES), on_connect=on_connect)

    @property
    def connected(self) -> bool:
        """Whether events flow now (False while the connection is being made again)."""
        return self._listener.connected.is_set()

    async def __aenter__(self) -> Events:
        await self._listener.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._listener.aclose()

    async def __aiter__(self) -> AsyncIterator[Event]:
        async for n in self._listener:
            yield Event(_NAMES[n.channel], n.payload)
