"""The game's events as they happen, from the database's NOTIFYs (db.notify), for the faces that
follow them: the bot's notifier (every game channel: it posts finished turns, its status board
shows progress and queue positions, its caches forget what changed), the bot's moderation log
(audit entries recorded) and the play page's event stream (its one channel). One LISTEN
connection per follower, which reconnects by itself; `on_connect` runs after every (re)connection,
since NOTIFYs sent while disconnected are lost and a face re-reads what it missed then.

Also a running turn's latest preview still (db.turn_previews), which a progress event only numbers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import NamedTuple

from db import notify, turn_previews
from db.listen import Listener
from service.runtime import Store

# Event names as a face knows them: the NOTIFY channel without the app's prefix.
TURN_FINISHED = "turn_finished"  # done or failed: {"turn_id", "session_id", "channel_id", "status"}
TURN_PROGRESS = "turn_progress"  # {"turn_id", "session_id", "channel_id", "progress", "stage"[, "preview": its number]}
TURN_QUEUED = "turn_queued"  # queued, regenerated or cancelled: {"turn_id", "session_id", "channel_id"}
SESSION_CHANGED = "session_changed"  # {"session_id", "channel_id", "event"}
CONFIG_CHANGED = "config_changed"  # a server's or channel's settings written: {"guild_id"}
AUDIT_RECORDED = "audit_recorded"  # an audit entry written, committed: {"audit_id", "guild_id"}
_CHANNEL_OF = {
    TURN_FINISHED: notify.TURN_FINISHED, TURN_PROGRESS: notify.TURN_PROGRESS, TURN_QUEUED: notify.TURN_QUEUED,
    SESSION_CHANGED: notify.SESSION_CHANGED, CONFIG_CHANGED: notify.CONFIG_CHANGED,
    AUDIT_RECORDED: notify.AUDIT_RECORDED,
}
GAME = (TURN_FINISHED, TURN_PROGRESS, TURN_QUEUED, SESSION_CHANGED, CONFIG_CHANGED)  # what happens in games


class Event(NamedTuple):
    name: str  # one of the names above
    payload: dict


class Events:
    """`async with Events(url) as events: async for e in events: ...`: the events named `names`
    (default: the games'), only channel `channel_id`'s when given. The first connection fails
    loudly (a wrong URL is a setup error); later drops reconnect."""

    def __init__(self, url: str, names: Iterable[str] = GAME, *, channel_id: int | None = None,
                 on_connect: Callable[[], Awaitable[None]] | None = None) -> None:
        self._name_of = {_CHANNEL_OF[name]: name for name in names}
        self.channel_id = channel_id
        self._listener = Listener(url, list(self._name_of), on_connect=on_connect)

    @property
    def connected(self) -> bool:
        """Whether events flow now (False while the connection is being made again)."""
        return self._listener.connected.is_set()

    async def open(self) -> None:
        await self._listener.__aenter__()

    async def aclose(self) -> None:
        await self._listener.aclose()

    async def __aenter__(self) -> Events:
        await self.open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def __aiter__(self) -> AsyncIterator[Event]:
        async for n in self._listener:
            if self.channel_id is None or n.payload.get("channel_id") == self.channel_id:
                yield Event(self._name_of[n.channel], n.payload)


async def latest_still(store: Store, turn_id: int) -> bytes | None:
    """The running turn's latest preview still (WebP), or None (none stored, or it ended)."""
    async with store.sessions() as s:
        found = await turn_previews.latest(s, turn_id)
    return None if found is None else found[1]
