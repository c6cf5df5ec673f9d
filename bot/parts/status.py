"""A turn's one message in its channel: sent when the turn is queued (its queue position and a
Cancel button), edited with a progress bar while it runs, and at the end edited into the turn's
post by the notifier (bot.parts.notifier), or closed here when the turn is cancelled.

A status message is public: it is built in the server's language (bot.parts.locale.public), which a
card keeps for the progress edits of its turn.

Every edit goes through the channel's edit scheduler (bot.parts.edits), which keeps each channel within
Discord's edit budget and coalesces progress and positions. Queue positions are refreshed only
when the queue changes (a turn queued, started, finished or cancelled), never on a mere progress
NOTIFY; what a status message shows of its turn is kept in memory, so a progress NOTIFY costs no
query (after a restart, one per turn).

While the turn runs, the message also shows the latest preview of its clip (a small WebP the
worker stores on the turn, service.events.latest_still; a progress NOTIFY names each new one): an edit that
replaces the message's attachments with it, through the same scheduler, so previews coalesce
with progress and never hold up the post, whose clip replaces the preview. A preview that cannot
be read is skipped, logged once per turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import discord
from discord.abc import GuildChannel, PrivateChannel

from bot.parts import locale
from bot.parts.buttons import CANCEL, view_of
from bot.parts.edits import EditScheduler, PostChannel, post_channel
from bot.parts.embeds import status_embed
from bot.parts.locale import Speaker
from bot.parts.service_args import Service
from bot.parts.shards import ShardClaim
from i18n import L_, Lazy, pgettext, use_locale
from i18n.formatting import number
from service import events, status
from service.runtime import Store

log = logging.getLogger(__name__)


def position_text(position: int | None) -> str:
    """A turn's place in the queue, in the current language."""
    if position is None:
        return pgettext("queue position", "waiting")
    if position == 0:
        return pgettext("queue position", "generating now")
    if position == 1:
        return pgettext("queue position", "next in the queue")
    return pgettext("queue position", "position %(position)s in the queue", position=number(position))


def status_nonce(turn: status.StatusTurn) -> str:
    """The status message's nonce: one message per generation of a turn, even if the send is retried."""
    return hashlib.blake2b(f"{turn.id}:{turn.seed}:status".encode(), digest_size=12).hexdigest()


@dataclass(frozen=True)
class Card:
    """What a status message shows of its turn, and where it is."""

    id: int
    seq: int
    instruction: str
    author_name: str
    channel_id: int
    message_id: int
    guild_id: int | None = None
    language: str = "en"  # the server's language when the message was sent (its progress edits keep it)


REGENERATED = L_("Generating this turn again with a new seed.")
PREVIEW_FILE = "preview.webp"


class BoardClient(Protocol):
    """The discord client, as far as the status board reads it."""

    @property
    def guilds(self) -> Sequence[discord.Guild]: ...

    def get_channel(self, id: int, /) -> GuildChannel | discord.Thread | PrivateChannel | None: ...


class StatusBoard:
    def __init__(self, client: BoardClient, *, service: Service, db: Store, languages: Speaker, claim: ShardClaim,
                 edits: EditScheduler, wake_notifier: Callable[[], None], refresh_delay: float = 0.2) -> None:
        """service: the game service; db: the database the previews are read from; languages: the
        servers' languages (bot.parts.locale); claim: this process's shards (bot.parts.shards);
        wake_notifier: called when a status message is sent (the notifier may wait for it)."""
        self.client = client
        self.service, self.db, self.languages, self.claim = service, db, languages, claim
        self.edits = edits
        self.wake_notifier = wake_notifier
        self.refresh_delay = refresh_delay  # a burst of queue changes makes one refresh
        self._cards: dict[int, Card] = {}  # turn id -> its open status message
        self._loading: dict[int, tuple[int, float, str]] = {}  # turn id -> latest progress while its card loads
        self._announcing: set[int] = set()  # turns whose status message is being sent
        self._running: set[int] = set()  # turns seen running (their first progress moves the queue)
        self._shown_position: dict[int, int | None] = {}
        self._closed: dict[int, None] = {}  # turns whose message is closed or posted (bounded)
        self._preview_no: dict[int, int] = {}  # turn id -> the newest preview asked for (open cards only)
        self._preview_failed: set[int] = set()  # turns whose preview failure was logged
        self._refresher: asyncio.Task | None = None
        self._refresh_again = False
        self._tasks: set[asyncio.Task] = set()

    def channel(self, channel_id: int, guild_id: int | None = None) -> PostChannel:
        return post_channel(self.edits.client, channel_id, guild_id)

    def announcing(self, turn_id: int) -> bool:
        """Its status message is being sent: the notifier waits rather than send a second message."""
        return turn_id in self._announcing

    def spawn(self, coro, name: str) -> None:
        """Run an edit (finish, strip_buttons) in the background: a clicker's or a moderator's
        answer need not wait for the channel's edit budget (up to ~5 s in a busy channel). Such
        edits swallow Discord's refusals themselves; close() cancels what is left."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _close_card(self, turn_id: int) -> Card | None:
        self._closed[turn_id] = None
        while len(self._closed) > 10_000:
            del self._closed[next(iter(self._closed))]
        self._running.discard(turn_id)
        self._shown_position.pop(turn_id, None)
        self._loading.pop(turn_id, None)
        self._preview_no.pop(turn_id, None)
        self._preview_failed.discard(turn_id)
        return self._cards.pop(turn_id, None)

    # --- queued

    async def announce_queued(self, turn_id: int, position: int | None, *, regenerated: bool = False) -> None:
        """Send the status message of a turn just queued, and record it on the turn."""
        self._closed.pop(turn_id, None)  # a regenerated turn runs (and shows progress) again
        self._running.discard(turn_id)
        self._announcing.add(turn_id)
        fresh = None
        deps = self.service()
        try:
            found = await status.turn(deps, turn_id)
            if found is None:  # gone meanwhile (its game's data deleted): nothing to show
                return
            turn, gs = found
            async with locale.public(self.languages, gs.guild_id, gs.channel_id) as language:
                embed = status_embed(turn, state="queued", position=position, note=REGENERATED if regenerated else None)
                view = view_of(CANCEL.button(turn.id))
            try:
                msg = await self.channel(gs.channel_id, gs.guild_id).send(embed=embed, view=view, nonce=status_nonce(turn))
            except (TimeoutError, discord.HTTPException, OSError) as e:  # queued all the same; posted as a new message
                log.warning("turn %s: could not post its status message: %s", turn.id, e)
                return
            fresh = await status.record_message(deps, turn.id, msg.id)
            self._shown_position[turn.id] = position
            self._cards[turn.id] = Card(turn.id, turn.seq, turn.instruction, turn.author_name, gs.channel_id, msg.id,
                                        gs.guild_id, language)
        finally:
            self._announcing.discard(turn_id)
            self.wake_notifier()  # it may have waited for this message
        # Cancelled before its status message existed: close it now.
        if fresh is not None:
            await self._close(fresh, "cancelled", None, gs.channel_id, gs.guild_id)

    def queue_changed(self) -> None:
        """A turn was queued, started, finished or cancelled: waiting turns may have moved.
        Coalesced: one refresh at a time, and one more if the queue changed during it."""
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.create_task(self._refresh_positions(), name="queue-positions")
        else:
            self._refresh_again = True

    async def _refresh_positions(self) -> None:
        while True:
            self._refresh_again = False
            await asyncio.sleep(self.refresh_delay)
            guild_ids = [g.id for g in self.client.guilds]
            if not guild_ids:
                return
            try:  # two queries, however many turns wait
                queued = await status.waiting(self.service(), guild_ids)
            except Exception as e:  # the database is down: the next change refreshes again
                log.warning("cannot refresh queue positions: %s", e)
                return
            for w in queued:
                turn, channel_id, message_id, position = w.turn, w.channel_id, w.message_id, w.position
                if not position or self._shown_position.get(turn.id) == position or turn.id in self._closed:
                    continue  # started meanwhile (0), no job (None), unchanged, or closed
                self._shown_position[turn.id] = position
                try:
                    language = await self._language(turn.id, channel_id)
                except Exception as e:  # the database is down: the next change refreshes again
                    log.warning("cannot refresh queue positions: %s", e)
                    return
                with use_locale(language):
                    embed = status_embed(turn, state="queued", position=position)
                    view = view_of(CANCEL.button(turn.id))
                self.edits.routine(channel_id, message_id, embed=embed, view=view)
            if not self._refresh_again:
                return

    def _guild_of(self, channel_id: int) -> int | None:
        channel = self.client.get_channel(channel_id)
        guild = getattr(channel, "guild", None)
        return getattr(guild, "id", None)

    async def _language(self, turn_id: int, channel_id: int, guild_id: int | None = None) -> str:
        """The server's language for a turn's status message: its card's, else the server's now."""
        card = self._cards.get(turn_id)
        if card is not None:
            return card.language
        return await locale.server_language(self.languages, guild_id or self._guild_of(channel_id), channel_id)

    # --- running

    def progress(self, turn_id: int, channel_id: int, fraction: float, stage: str | None, preview: int | None = None) -> None:
        """A running turn's progress; `preview`: the number of a new preview stored on the turn."""
        if turn_id in self._closed:
            return
        if turn_id not in self._running:
            self._running.add(turn_id)
            self._shown_position.pop(turn_id, None)
            self.queue_changed()  # it started: the turns behind it moved up
        card = self._cards.get(turn_id)
        if card is not None:
            if preview is not None and preview > self._preview_no.get(turn_id, 0):
                self._preview_no[turn_id] = preview
                self.spawn(self._show_preview(card, preview, fraction, stage or ""), f"status-preview-{turn_id}")
            else:
                self._show_progress(card, fraction, stage or "")
            return
        first = turn_id not in self._loading
        self._loading[turn_id] = (channel_id, fraction, stage or "")
        if first:  # after a restart: learn the turn once
            self.spawn(self._load_card(turn_id), f"status-card-{turn_id}")

    def _show_progress(self, card: Card, fraction: float, stage: str) -> None:
        with use_locale(card.language):
            embed = status_embed(card, state="generating", position=0, progress=fraction, stage=stage)
        self.edits.routine(card.channel_id, card.message_id, embed=embed, view=None)

    async def _show_preview(self, card: Card, number: int, fraction: float, stage: str) -> None:
        """Progress with the preview stored on the turn (a newer one than `number` if the worker
        stored one meanwhile); skipped if it is gone (the turn ended) or cannot be read."""
        try:
            found = await events.latest_still(self.db, card.id)
        except Exception:  # noqa: BLE001  (a preview is a courtesy)
            if card.id not in self._preview_failed:
                self._preview_failed.add(card.id)
                log.warning("turn %s: a preview could not be read; skipped (logged once per turn)", card.id, exc_info=True)
            found = None
        if card.id in self._closed or self._preview_no.get(card.id, 0) > number:
            return  # posted meanwhile, or a newer preview's edit follows
        if found is None:
            self._show_progress(card, fraction, stage)
            return
        with use_locale(card.language):
            embed = status_embed(card, state="generating", position=0, progress=fraction, stage=stage)
        still = discord.File(io.BytesIO(found), filename=PREVIEW_FILE)
        # Replaces the message's attachments (the previous preview) with this one; the post's clip replaces it in turn.
        self.edits.routine(card.channel_id, card.message_id, embed=embed, view=None, attachments=[still])

    async def _load_card(self, turn_id: int) -> None:
        try:
            found = await status.turn(self.service(), turn_id)
        except Exception as e:
            log.info("turn %s: progress not shown: %s", turn_id, e)
            self._loading.pop(turn_id, None)
            return
        if found is None:
            self._loading.pop(turn_id, None)
            return
        turn, gs = found
        if not self.claim.owns(gs.guild_id):
            # Another process's shard (every process hears every NOTIFY): its status message is
            # that process's to edit; an edit from here could even land after its post. Closed
            # here, so that the turn's next progress costs nothing.
            self._close_card(turn_id)
            return
        try:
            language = await locale.server_language(self.languages, gs.guild_id, gs.channel_id)
        except Exception as e:
            log.info("turn %s: progress not shown: %s", turn_id, e)
            self._loading.pop(turn_id, None)
            return
        latest = self._loading.pop(turn_id, None)
        if turn.status != "running" or not turn.status_message_id or latest is None or turn_id in self._closed:
            return
        card = self._cards[turn_id] = Card(turn.id, turn.seq, turn.instruction, turn.author_name, gs.channel_id,
                                           turn.status_message_id, gs.guild_id, language)
        self._show_progress(card, latest[1], latest[2])

    # --- closed

    def posted(self, turn_id: int) -> None:
        """The notifier edited the status message into the post: nothing more to show here."""
        self._close_card(turn_id)

    async def finish(self, turn_id: int, state: str, *, note: str | Lazy | None = None) -> None:
        """Close a turn's status message without a post (cancelled, or not posted): no buttons,
        and no progress edit after this one. The message is public: it is rendered in the server's
        language, so a `note` written where the member's language is current must be lazy (L_)."""
        self._close_card(turn_id)
        try:
            found = await status.turn(self.service(), turn_id)
        except Exception as e:  # the database is down: the message keeps its Cancel button, which answers
            log.info("turn %s: could not close its status message: %s", turn_id, e)
            return
        if found is not None:
            turn, gs = found
            await self._close(turn, state, note, gs.channel_id, gs.guild_id)

    async def _close(self, turn: status.StatusTurn, state: str, note: str | Lazy | None, channel_id: int,
                     guild_id: int) -> None:
        if not turn.status_message_id:
            return
        async with locale.public(self.languages, guild_id, channel_id):
            embed = status_embed(turn, state=state, note=note)
        try:
            await self.edits.final(channel_id, turn.status_message_id, embed=embed, view=None, attachments=[])  # no preview left
        except discord.HTTPException as e:  # deleted or hidden: nothing left to close
            log.info("turn %s: could not close its status message: %s", turn.id, e)

    async def strip_buttons(self, channel_id: int, message_id: int) -> None:
        try:
            await self.edits.final(channel_id, message_id, view=None)
        except discord.HTTPException as e:
            log.info("could not remove the buttons of message %s: %s", message_id, e)

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
        for t in list(self._tasks):
            t.cancel()
