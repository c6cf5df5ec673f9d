"""A game channel's live events, from the database's NOTIFYs (db.notify), for a face that shows
them as they happen (the play page's event stream): one LISTEN connection (db.listen's Listener,
which reconnects by itself), the channel's events named as a face knows them ("turn_finished"...),
and a running turn's latest preview still (db.turn_previews), which a progress event only numbers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from db import notify, turn_previews
from db.listen import Listener
from service.runtime import Store

# Event names as a face knows them: the NOTIFY channel without the app's prefix.
NAMES = {ch: ch.removeprefix("animegamer_") for ch in notify.CHANNELS}
TURN_PROGRESS = NAMES[notify.TURN_PROGRESS]  # {"turn_id", "progress", "stage"[, "preview": its number]}


class ChannelEvents:
    """The events of channel `channel_id`, each `{"type": name, **payload}`. `on_connect` runs after
    every (re)connection: NOTIFYs sent while disconnected are lost, so a face re-reads then."""

    def __init__(self, url: str, channel_id: int, *, on_connect: Callable[[], Awaitable[None]] | None = None) -> None:
        self.channel_id = channel_id
        self._listener = Listener(url, notify.CHANNELS, on_connect=on_connect)

    @property
    def connected(self) -> bool:
        return self._listener.connected.is_set()

    async def open(self) -> None:
        """Listen (the first connection fails loudly: a wrong URL is a setup error)."""
        await self._listener.__aenter__()

    async def aclose(self) -> None:
        await self._listener.aclose()

    async def __aiter__(self) -> AsyncIterator[dict]:
        async for n in self._listener:
            if n.payload.get("channel_id") == self.channel_id:
                yield {"type": NAMES.get(n.channel, n.channel), **n.payload}


async def latest_still(store: Store, turn_id: int) -> bytes | None:
    """The running turn's latest preview still (WebP), or None (none stored, or it ended)."""
    async with store.sessions() as s:
        found = await turn_previews.latest(s, turn_id)
    return None if found is None else found[1]
