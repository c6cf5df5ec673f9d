"""One owner for every edit of the bot's channel messages: Discord allows about 5 edits per 5 s per
channel, so each channel's edits wait for its budget, one at a time.

While an edit waits, a newer edit of the same message replaces it: progress and queue positions
coalesce to their latest value instead of piling up. Edits are routine (progress, a queue
position: fire and forget, dropped on error) or final (the post, a closing edit: awaited, errors
raised to the caller). Final edits go first, and once a message has had a final edit no routine
edit touches it again, so a late progress bar can never overwrite a posted turn.

A newer routine edit of a message is merged into the one waiting (its fields over the older
ones'), which is what making both in turn would leave: a preview's attachment queued before a
progress edit stays in the merged edit.

The budget is a sliding window measured from each edit's completion: the edit that follows the
`limit`-th previous one starts at least `per` seconds after that one ended, so even requests that
Discord receives late never put more than `limit` edits in any `per`-second window. Routine edits
are spaced out and leave the window's last slot free, so a final edit (a turn's post) never waits
for progress or previews; it waits only when final edits alone fill the window.

An edit's texts are rendered by its caller, in the language of the message (the server's for a
public one: bot.parts.locale.public around the build); an edit runs later, in a task of its channel, so
a lazy `content` is rendered when the edit is scheduled, never in that task.

The edits waiting (`pending_count`) and each edit's wait, from being queued to its request
starting, are the bot's animegamer_bot_edit_queue_depth and animegamer_bot_edit_wait_seconds.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

import discord
from discord.abc import GuildChannel, PrivateChannel

from bot.parts.metrics import BotMetrics
from i18n import Lazy

log = logging.getLogger(__name__)

# The channels a message can be sent to and edited in.
PostChannel = (
    discord.TextChannel | discord.VoiceChannel | discord.StageChannel | discord.Thread | discord.DMChannel | discord.PartialMessageable
)
_POST_CHANNELS = (discord.TextChannel, discord.VoiceChannel, discord.StageChannel, discord.Thread, discord.DMChannel)


class Channels(Protocol):
    """The discord client, as far as finding a channel to send to or edit in reads it."""

    def get_channel(self, id: int, /) -> GuildChannel | discord.Thread | PrivateChannel | None: ...

    def get_partial_messageable(self, id: int, /, *, guild_id: int | None = None) -> discord.PartialMessageable: ...


class EditClient(Channels, Protocol):
    """The discord client, as far as the edit scheduler reads it."""

    @property
    def allowed_mentions(self) -> discord.AllowedMentions | None: ...


def post_channel(bot: Channels, channel_id: int, guild_id: int | None = None) -> PostChannel:
    """A channel to send to or edit in: the cached one, else a partial one (no request). A cached
    channel that holds no messages of its own (a forum, a category) gets the partial one too, which
    Discord refuses with an HTTP error like any other channel the bot cannot post in."""
    found = bot.get_channel(channel_id)
    if isinstance(found, _POST_CHANNELS):
        return found
    return bot.get_partial_messageable(channel_id, guild_id=guild_id)


def _rendered(fields: dict) -> dict:
    """The edit's fields with a lazy content rendered now, in the caller's locale."""
    if isinstance(fields.get("content"), Lazy):
        return {**fields, "content": str(fields["content"])}
    return fields


@dataclass
class _Edit:
    fields: dict
    final: bool
    waiters: list[asyncio.Future] = field(default_factory=list)
    queued_at: float = field(default_factory=time.monotonic)  # a newer edit replacing it keeps its place and age


class _Channel:
    def __init__(self, limit: int) -> None:
        self.pending: dict[int, _Edit] = {}  # message id -> the edit to make (insertion order = FIFO)
        self.done_at: collections.deque[float] = collections.deque(maxlen=limit)  # completions
        self.task: asyncio.Task | None = None
        self.final_added = asyncio.Event()  # cuts short a wait for a routine edit's turn


class EditScheduler:
    def __init__(self, client: EditClient, metrics: BotMetrics, *, limit: int = 5, per: float = 5.0) -> None:
        self.client, self.metrics = client, metrics
        self.limit = limit
        self.per = per
        self.gap = per / limit  # spread edits out rather than spending the window at once
        self._channels: dict[int, _Channel] = {}
        self._final: dict[int, None] = {}  # message ids that had their final edit (bounded)

    def _channel(self, channel_id: int) -> _Channel:
        ch = self._channels.get(channel_id)
        if ch is None:
            ch = self._channels[channel_id] = _Channel(self.limit)
        return ch

    def routine(self, channel_id: int, message_id: int, **fields) -> None:
        """Edit soon, within the budget; a newer edit of the same message is merged into it while
        it waits; never after the message's final edit."""
        if message_id in self._final:
            return
        fields = _rendered(fields)
        ch = self._channel(channel_id)
        current = ch.pending.get(message_id)
        if current is not None and current.final:
            return
        if current is None:
            ch.pending[message_id] = _Edit(fields, final=False)
        else:
            current.fields = {**current.fields, **fields}
        self._kick(channel_id, ch)

    async def final(self, channel_id: int, message_id: int, **fields) -> discord.Message | None:
        """Edit within the budget, ahead of routine edits; returns the edited message or raises
        what Discord answered. Routine edits of this message are dropped from now on."""
        self._mark_final(message_id)
        fields = _rendered(fields)
        ch = self._channel(channel_id)
        waiter = asyncio.get_running_loop().create_future()
        current = ch.pending.pop(message_id, None)
        edit = _Edit(fields, final=True, waiters=[waiter])
        if current is not None and current.final:
            edit.waiters += current.waiters  # the newer final edit answers for both
            edit.queued_at = current.queued_at
        # Final edits go first: put this one ahead of every routine edit.
        ch.pending = {message_id: edit, **ch.pending}
        ch.final_added.set()
        self._kick(channel_id, ch)
        return await waiter

    def pending_count(self) -> int:
        """Edits waiting in every channel (the bot's animegamer_bot_edit_queue_depth)."""
        return sum(len(ch.pending) for ch in self._channels.values())

    def _mark_final(self, message_id: int) -> None:
        self._final[message_id] = None
        while len(self._final) > 10_000:
            del self._final[next(iter(self._final))]

    def _kick(self, channel_id: int, ch: _Channel) -> None:
        if ch.task is None or ch.task.done():
            ch.task = asyncio.create_task(self._run(channel_id, ch), name=f"edits-{channel_id}")

    def _wait(self, ch: _Channel, final: bool) -> float:
        """Seconds until the next edit may start: a final one when the window has room, a routine
        one `gap` after the last edit and while one slot of the window stays free."""
        now = time.monotonic()
        wait = 0.0
        if ch.done_at and not final:
            wait = ch.done_at[-1] + self.gap - now
        room = self.limit if final else max(1, self.limit - 1)
        if len(ch.done_at) >= room:
            wait = max(wait, ch.done_at[-room] + self.per - now)
        return wait

    async def _run(self, channel_id: int, ch: _Channel) -> None:
        while ch.pending:
            message_id = next(iter(ch.pending))  # final edits are first
            wait = self._wait(ch, ch.pending[message_id].final)
            if wait > 0:
                ch.final_added.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ch.final_added.wait(), wait)
                continue  # edits may have been replaced or added meanwhile
            edit = ch.pending.pop(message_id)
            self.metrics.edit_waited(time.monotonic() - edit.queued_at)  # queued -> its request starts
            try:
                msg = await self._apply(channel_id, message_id, edit.fields)
            except Exception as e:
                if not edit.final:
                    log.info("could not edit message %s in %s: %s", message_id, channel_id, e)
                for w in edit.waiters:
                    if not w.done():
                        w.set_exception(e)
            else:
                for w in edit.waiters:
                    if not w.done():
                        w.set_result(msg)
            finally:
                ch.done_at.append(time.monotonic())

    async def _apply(self, channel_id: int, message_id: int, fields: dict) -> discord.Message:
        channel = post_channel(self.client, channel_id)
        # Edits, like sends, never ping (PartialMessage.edit does not apply the client's default).
        fields.setdefault("allowed_mentions", self.client.allowed_mentions)
        return await channel.get_partial_message(message_id).edit(**fields)

    async def close(self) -> None:
        tasks = [ch.task for ch in self._channels.values() if ch.task is not None and not ch.task.done()]
        for t in tasks:
            t.cancel()
        for ch in self._channels.values():
            for e in ch.pending.values():
                for w in e.waiters:
                    if not w.done():
                        w.cancel()
            ch.pending.clear()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
