"""A turn's status message: posted when the turn is queued (with its queue position and a Cancel
button), edited in place with a progress bar while it runs, and closed when it is posted,
cancelled or failed.

Discord limits edits to about 5 per 5 s per channel, so progress edits are coalesced per channel:
the latest value of each running turn is kept and written at most once per `min_interval`.
"""

from __future__ import annotations

import asyncio
import logging
import time

import discord

from bot.embeds import status_embed
from bot.views import CancelButton, view_of
from db import turns as turn_service
from db.models import GameSession, Turn

log = logging.getLogger(__name__)

FINISHED_STATES = ("done", "failed", "cancelled")


def position_text(position: int | None) -> str:
    if position is None:
        return "waiting"
    if position == 0:
        return "generating now"
    return "next in the queue" if position == 1 else f"position {position} in the queue"


class StatusBoard:
    def __init__(self, bot, min_interval: float = 1.5) -> None:
        self.bot = bot
        self.min_interval = min_interval
        self._last_edit: dict[int, float] = {}  # channel id -> monotonic time of the last progress edit
        self._pending: dict[int, dict[int, tuple[float, str]]] = {}  # channel -> turn -> (fraction, stage)
        self._flushers: dict[int, asyncio.Task] = {}
        self._locks: dict[int, asyncio.Lock] = {}  # one edit at a time per channel, so a late
        self._closed: dict[int, None] = {}  # progress edit never lands after the closing one
        self._shown_position: dict[int, int | None] = {}  # turn id -> position its message shows
        self._refresher: asyncio.Task | None = None
        self._refresh_again = False

    def _lock(self, channel_id: int) -> asyncio.Lock:
        return self._locks.setdefault(channel_id, asyncio.Lock())

    def _mark_closed(self, turn_id: int) -> None:
        self._closed[turn_id] = None
        while len(self._closed) > 10_000:
            del self._closed[next(iter(self._closed))]

    def channel(self, channel_id: int, guild_id: int | None = None):
        return self.bot.get_channel(channel_id) or self.bot.get_partial_messageable(channel_id, guild_id=guild_id)

    async def _edit(self, channel_id: int, message_id: int, **fields) -> bool:
        try:
            await self.channel(channel_id).get_partial_message(message_id).edit(**fields)
            return True
        except discord.NotFound:
            return False  # someone deleted the status message: nothing left to update
        except discord.HTTPException as e:
            log.warning("could not edit status message %s: %s", message_id, e)
            return False

    async def announce_queued(self, turn: Turn, position: int | None, *, regenerated: bool = False) -> None:
        """Post the status message of a turn just queued, and remember it on the turn."""
        self._closed.pop(turn.id, None)  # a regenerated turn runs (and shows progress) again
        async with self.bot.db.sessions() as s:
            gs = await s.get(GameSession, turn.session_id)
        note = "Generating this turn again with a new seed." if regenerated else None
        embed = status_embed(turn, state="queued", position=position, note=note)
        self._shown_position[turn.id] = position
        try:
            msg = await self.channel(gs.channel_id, gs.guild_id).send(embed=embed, view=view_of(CancelButton(turn.id)))
        except discord.HTTPException as e:  # the turn is queued all the same; it just has no status message
            log.warning("turn %s: could not post its status message: %s", turn.id, e)
            return
        async with self.bot.db.sessions.begin() as s:
            await turn_service.set_status_message(s, turn.id, msg.id)
            fresh = await turn_service.get_turn(s, turn.id)
        # The turn may have finished (or been cancelled) before its status message existed; the
        # notifier then found no message to close, so close it here.
        if fresh is not None and (fresh.status == "cancelled" or fresh.posted_at is not None):
            await self.finish(fresh, fresh.status, channel_id=gs.channel_id)

    def progress(self, turn_id: int, channel_id: int, fraction: float, stage: str | None) -> None:
        self._pending.setdefault(channel_id, {})[turn_id] = (fraction, stage or "")
        task = self._flushers.get(channel_id)
        if task is None or task.done():
            self._flushers[channel_id] = asyncio.create_task(self._flush(channel_id), name=f"progress-{channel_id}")

    async def _flush(self, channel_id: int) -> None:
        while self._pending.get(channel_id):
            wait = self._last_edit.get(channel_id, 0.0) + self.min_interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            batch = self._pending.pop(channel_id, {})
            for turn_id, (fraction, stage) in batch.items():
                async with self.bot.db.sessions() as s:
                    turn = await turn_service.get_turn(s, turn_id)
                if turn is None or turn.status != "running" or not turn.status_message_id:
                    continue
                async with self._lock(channel_id):
                    if turn_id in self._closed:
                        continue
                    self._last_edit[channel_id] = time.monotonic()
                    embed = status_embed(turn, state="generating", position=0, progress=fraction, stage=stage)
                    await self._edit(channel_id, turn.status_message_id, embed=embed, view=None)

    def positions_changed(self) -> None:
        """A turn started, finished or was cancelled: queued turns may have moved up. Coalesced:
        one refresh at a time, at most one per `min_interval`."""
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.create_task(self._refresh_positions(), name="queue-positions")
        else:
            self._refresh_again = True

    async def _refresh_positions(self) -> None:
        while True:
            self._refresh_again = False
            await asyncio.sleep(self.min_interval)
            guild_ids = [g.id for g in self.bot.guilds]
            if not guild_ids:
                return
            async with self.bot.db.sessions() as s:
                waiting = [
                    (turn, channel_id, await self.bot.queue.position(s, turn))
                    for turn, channel_id in await turn_service.queued_with_status_message(s, guild_ids)
                ]
            for turn, channel_id, position in waiting:
                if not position or self._shown_position.get(turn.id) == position:
                    continue  # started meanwhile (0), no job (None), or unchanged
                async with self._lock(channel_id):
                    if turn.id in self._closed:
                        continue
                    wait = self._last_edit.get(channel_id, 0.0) + self.min_interval - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    self._last_edit[channel_id] = time.monotonic()
                    embed = status_embed(turn, state="queued", position=position)
                    if await self._edit(channel_id, turn.status_message_id, embed=embed, view=view_of(CancelButton(turn.id))):
                        self._shown_position[turn.id] = position
            if not self._refresh_again:
                return

    async def finish(self, turn: Turn, state: str, *, note: str | None = None, channel_id: int | None = None,
                     jump_url: str | None = None) -> None:
        """Close a turn's status message (no more buttons); progress still pending for it is dropped."""
        if channel_id is None:
            async with self.bot.db.sessions() as s:
                channel_id = (await s.get(GameSession, turn.session_id)).channel_id
        self._pending.get(channel_id, {}).pop(turn.id, None)
        self._shown_position.pop(turn.id, None)
        self._mark_closed(turn.id)
        if not turn.status_message_id:
            return
        label = {"done": "posted", "failed": "failed", "cancelled": "cancelled"}.get(state, state)
        if jump_url and not note:
            note = f"[See the result]({jump_url})"
        embed = status_embed(turn, state=label, note=note)
        async with self._lock(channel_id):
            self._last_edit[channel_id] = time.monotonic()
            await self._edit(channel_id, turn.status_message_id, embed=embed, view=None)

    async def strip_buttons(self, channel_id: int, message_id: int) -> None:
        await self._edit(channel_id, message_id, view=None)

    async def close(self) -> None:
        for task in self._flushers.values():
            task.cancel()
        self._flushers.clear()
        if self._refresher is not None:
            self._refresher.cancel()
