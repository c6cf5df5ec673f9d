"""Posts finished turns to their channels, each exactly once and in order, and relays progress.

A dedicated LISTEN connection (service.events) wakes the poster when a turn finishes and feeds progress
and queue changes to the status board; the scheduler's sweep (bot.parts.maintenance) and every
(re)connection wake it too, for anything missed while the bot or its connection was down.

One message per turn: posting edits the turn's status message (sent when it was queued, its id
recorded then) into the post: the MP4, the final embed and a Regenerate button. An edit is
idempotent, so a poster that died between the edit and recording it posted only repeats it. Only when
the turn has no status message (it could not be sent, or someone deleted it) is a new message
sent; that send carries a nonce (`enforce_nonce`) and its id is recorded at once. Before sending,
the notifier looks in the channel for this turn's message whose recording was lost (a bot that
died between Discord creating it and the database recording it): a post is taken as it is, a
status message is edited into the post. So a re-post after the claim's lease cannot duplicate,
even once Discord has forgotten the nonce.

Failures: a try that fails (any HTTP error but 403/404, a timeout, a dropped connection) is
retried after `retry_delays` (a few tries over minutes); after the last one the turn is marked as
not posted (`post_error`) with a short notice in the channel, and the later turns of its channel,
held back meanwhile, are posted in order after it.

Posts are public: each is built in its server's language (bot.parts.locale.public) — the embed, the
clip's note, the Regenerate button's label and the failure notice.

Metrics (bot.parts.metrics): each post's lag from the turn's finish (animegamer_bot_post_lag_seconds),
tries that failed and will be tried again (animegamer_bot_post_retries_total), and turns given up
on, after the last try or at once where the channel is gone or closed to the bot
(animegamer_bot_post_giveups_total).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import io
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol

import discord
from discord.abc import GuildChannel, PrivateChannel

from bot.parts import locale, removal
from bot.parts.buttons import REGENERATE, view_of
from bot.parts.config_cache import ConfigCache
from bot.parts.edits import EditScheduler
from bot.parts.embeds import CONTENT_MAX, failed_embed, fit, status_embed, turn_embed
from bot.parts.locale import Speaker
from bot.parts.metrics import BotMetrics
from bot.parts.service_args import Service
from bot.parts.status import StatusBoard
from game.catalogue import display_film
from i18n import L_, _
from i18n.formatting import size
from service import events, posting
from service.posting import Post
from service.runtime import Store

log = logging.getLogger(__name__)

RETRY_DELAYS = (30.0, 120.0, 300.0)  # seconds before the 2nd, 3rd and 4th try (about 7.5 minutes in all)
FOUND_POST_LOOKBACK = 50  # messages searched for a turn's message whose recording was lost


def post_lag(turn: Post, now: datetime | None = None) -> float:
    """Seconds from the turn's finish (turns.finished_at, the database's clock) to now."""
    finished = turn.finished_at
    if finished is None:
        return 0.0
    if finished.tzinfo is None:
        finished = finished.replace(tzinfo=UTC)
    return max(0.0, ((now or datetime.now(UTC)) - finished).total_seconds())


def message_nonce(turn: Post) -> str:
    """Stable for one generation of a turn, new after a regeneration (new seed); <= 25 chars."""
    return hashlib.blake2b(f"{turn.id}:{turn.seed}:{turn.status}".encode(), digest_size=12).hexdigest()


class Outcome(enum.Enum):
    POSTED = "posted"  # or nothing to post any more
    LATER = "later"  # not now, and not a failure (its status message is still being sent)
    FAILED = "failed"  # Discord or the network failed: counts as a try


class NotifierClient(Protocol):
    """The discord client, as far as the notifier reads it."""

    @property
    def guilds(self) -> Sequence[discord.Guild]: ...

    @property
    def user(self) -> discord.ClientUser | None: ...

    def get_channel(self, id: int, /) -> GuildChannel | discord.Thread | PrivateChannel | None: ...

    async def fetch_channel(self, channel_id: int, /) -> GuildChannel | PrivateChannel | discord.Thread: ...

    def is_ready(self) -> bool: ...

    async def wait_until_ready(self) -> None: ...


class Notifier:
    def __init__(
        self,
        client: NotifierClient,
        *,
        service: Service,
        db: Store,
        languages: Speaker,
        config: ConfigCache,
        board: StatusBoard,
        edits: EditScheduler,
        metrics: BotMetrics,
        upload_limits: Mapping[int, int],
        lease: timedelta | None = None,
        claimant: str | None = None,
        retry_delays: tuple[float, ...] = RETRY_DELAYS,
    ) -> None:
        """service: the game service; db: the database it LISTENs to; languages: the servers'
        languages (bot.parts.locale); config: the configuration cache its notifications keep
        current; board: the status messages it turns into posts; upload_limits: guild id -> the
        attachment size limit seen on interactions (the client's, kept current there)."""
        self.client = client
        self.service, self.db, self.languages, self.config = service, db, languages, config
        self.board, self.edits, self.metrics, self.upload_limits = board, edits, metrics, upload_limits
        self.lease = lease  # None: the service's usual lease
        self.claimant = claimant or f"bot:{socket.gethostname()}:{os.getpid()}"
        self.retry_delays = tuple(retry_delays)
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.listening = asyncio.Event()  # set once LISTEN is in place (the caches can be trusted)
        self._events: events.Events | None = None  # the LISTEN connection while it exists

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._listen(), name="notifier-listen"),
            asyncio.create_task(self._poster(), name="notifier-poster"),
        ]

    async def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        if not self._tasks:
            return
        for t in self._tasks:
            t.cancel()
        # Bounded: a connection to a database that vanished can take long to tear down.
        await asyncio.wait(self._tasks, timeout=5)

    def wake(self) -> None:
        self._wake.set()

    def wake_at(self, when: datetime) -> None:
        """Wake the poster at `when` (the next postponed try), unless it wakes sooner anyway."""
        delay = max(0.0, (when - datetime.now(UTC)).total_seconds()) + 0.05
        loop = asyncio.get_running_loop()
        if self._timer is not None and self._timer.when() <= loop.time() + delay:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(delay, self.wake)

    # --- listening

    @property
    def live(self) -> bool:
        """Whether notifications flow now: the LISTEN connection is up (it reconnects by itself)."""
        return self._events is not None and self._events.connected

    async def _on_connect(self) -> None:
        self.config.clear()  # configuration changes may have been missed
        self.listening.set()
        self.wake()  # sweep for what finished while we were not listening

    async def _listen(self) -> None:
        delay = 1.0
        while not self._closed:
            try:
                async with events.Events(self.db.url, on_connect=self._on_connect) as heard:
                    delay = 1.0
                    self._events = heard
                    async for e in heard:
                        self._dispatch(e.name, e.payload)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the database is down: keep trying; the sweep covers the gap
                log.warning("notifier cannot LISTEN (%s); retrying in %.0f s", e, delay)
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)

    def _dispatch(self, event: str, p: dict) -> None:
        if event == events.TURN_FINISHED:
            self.wake()
            self.board.queue_changed()
        elif event == events.TURN_PROGRESS:
            # A turn's first progress also tells the board it started (the queue moved).
            preview = p.get("preview")  # a new preview stored on the turn: its number
            self.board.progress(int(p["turn_id"]), int(p["channel_id"]), float(p["progress"]), p.get("stage"),
                                None if preview is None else int(preview))
        elif event == events.TURN_QUEUED:  # queued, regenerated or cancelled
            self.board.queue_changed()
        elif event == events.SESSION_CHANGED:
            self.config.session_changed(p.get("channel_id"))
        elif event == events.CONFIG_CHANGED:
            self.config.config_changed(p.get("guild_id"))

    # --- posting

    async def _poster(self) -> None:
        await self.client.wait_until_ready()  # channels are known only after READY
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.post_pending()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("posting finished turns failed (%s); the sweep will retry", e)

    async def post_pending(self) -> int:
        """Claim and post every finished, unposted turn of this bot's guilds; returns how many
        were posted. A session's turns are posted in order: while one waits for its next try, the
        later ones wait too (claim_unposted does not hand them out)."""
        if not self.client.is_ready():
            return 0
        posted = 0
        deps = self.service()
        async with self._lock:
            while True:
                guild_ids = [g.id for g in self.client.guilds]
                if not guild_ids:
                    return posted
                claimed = await posting.claim(deps, self.claimant, guild_ids, self.lease)
                if not claimed:
                    break
                held: set[int] = set()
                later = False
                for turn in claimed:
                    outcome = Outcome.LATER if turn.session_id in held else await self._post(turn.turn_id)
                    if outcome is Outcome.POSTED:
                        posted += 1
                        continue
                    held.add(turn.session_id)
                    if outcome is Outcome.LATER:
                        later = True
                        await posting.release(deps, turn.turn_id)
                if later:  # a status message is on its way; announce_queued wakes us when it is sent
                    break
            retry = await posting.next_retry(deps, guild_ids)
        if retry is not None:
            self.wake_at(retry)
        return posted

    def upload_limit(self, guild: discord.Guild | None) -> int:
        if guild is None:
            return 10 * 1024 * 1024
        return self.upload_limits.get(guild.id) or guild.filesize_limit

    async def _post(self, turn_id: int) -> Outcome:
        if self.board.announcing(turn_id):  # checked before reading the turn: see StatusBoard
            return Outcome.LATER
        deps = self.service()
        turn = await posting.to_post(deps, turn_id)
        if turn is None:
            return Outcome.POSTED  # regenerated or posted by someone else since the claim: nothing to send
        channel = self.client.get_channel(turn.channel_id)
        try:
            if channel is None:
                channel = await self.client.fetch_channel(turn.channel_id)
            async with locale.public(self.languages, turn.guild_id, turn.channel_id):
                message_id = await self._deliver(turn, channel)
        except (discord.NotFound, discord.Forbidden) as e:
            log.warning("turn %s: cannot post in channel %s (%s); giving up on it", turn.id, turn.channel_id, e)
            await self._mark_posted(turn.id, None, f"the channel is gone or closed to the bot ({e.status})")
            self.metrics.post_giveups.inc()
            return Outcome.POSTED
        except (TimeoutError, discord.HTTPException, OSError) as e:
            await self._failed(turn, channel, e)
            return Outcome.FAILED
        self.metrics.posted(post_lag(turn))  # sent: the lag ends here, before it is recorded
        await self._mark_posted(turn.id, message_id)
        self.board.posted(turn.id)
        if turn.removed_at is None:  # taken down while this post was on its way: the notice replaces it
            async with locale.public(self.languages, turn.guild_id, turn.channel_id):
                await removal.reshow_if_removed(deps, self.edits, turn.id, turn.channel_id, message_id)
        log.info("turn %s (#%s) posted in message %s", turn.id, turn.seq, message_id)
        return Outcome.POSTED

    def _post_fields(self, turn: Post, film, channel, clip_too_big: bool = False) -> dict:
        """The post's message fields, rendered in the current locale (the server's: see _post)."""
        if turn.removed_at is not None:  # taken down before its post: the notice instead
            return removal.removed_fields(turn)
        view = view_of(REGENERATE.button(turn.id))
        if turn.status == "failed":
            return {"embed": failed_embed(turn, film), "attachments": [], "view": view}
        limit = self.upload_limit(getattr(channel, "guild", None))
        note = None
        if turn.mp4 is None:
            note = _("The clip is no longer stored.") if turn.clip_pruned else _("This turn has no clip.")
        elif clip_too_big and len(turn.mp4) <= limit:  # the server's real limit is lower than we knew
            note = _("The clip (%(size)s) is larger than this server's upload limit, so it is not attached.",
                     size=size(len(turn.mp4)))
        elif clip_too_big or len(turn.mp4) > limit:
            note = _("The clip (%(size)s) is larger than this server's upload limit (%(limit)s), so it is not attached.",
                     size=size(len(turn.mp4)), limit=size(limit))
        files = [] if note or turn.mp4 is None else [discord.File(io.BytesIO(turn.mp4), filename=f"turn-{turn.seq}.mp4")]
        return {"embed": turn_embed(turn, film, clip_note=note), "attachments": files, "view": view}

    async def _deliver(self, turn: Post, channel) -> int:
        """Put the post in the channel; returns its message id."""
        film = display_film(turn.film_id)
        fields = self._post_fields(turn, film, channel)
        try:
            return await self._edit_or_send(turn, channel, fields)
        except discord.HTTPException as e:
            if e.status != 413 or not fields["attachments"]:
                raise
            # The server's limit was lower than we knew: post the turn without its clip.
            return await self._edit_or_send(turn, channel, self._post_fields(turn, film, channel, clip_too_big=True), nonce_suffix="n")

    async def _edit_or_send(self, turn: Post, channel, fields: dict, nonce_suffix: str = "") -> int:
        if turn.status_message_id is not None:
            try:
                await self.edits.final(channel.id, turn.status_message_id, **fields)
                return turn.status_message_id
            except discord.NotFound:
                log.info("turn %s: its status message was deleted; posting a new one", turn.id)
        # A message of this turn whose recording was lost (the bot died between Discord creating
        # it and the database recording it): the post itself, or a status message to edit.
        found, is_post = await self._find_message(turn, channel)
        if found is not None and is_post:
            return found
        if found is not None:
            try:
                await self.edits.final(channel.id, found, **fields)
                return found
            except discord.NotFound:
                pass
        files = fields.pop("attachments")
        msg = await channel.send(**fields, files=files, nonce=message_nonce(turn) + nonce_suffix)
        await self._mark_posted(turn.id, msg.id)  # recorded at once: the lease never runs out on it
        return msg.id

    async def _find_message(self, turn: Post, channel) -> tuple[int | None, bool]:
        """This generation's message in the channel, sent by a bot that died before recording it:
        the bot's own, with this turn's Cancel button and sent since the turn was (re)queued (its
        status message: False), or with its Regenerate button and sent since it finished (its post:
        True; an earlier take's post, not yet stripped of its button, is older). (None, False) if
        there is none."""
        cancel, regen = f"ag:cancel:{turn.id}", f"ag:regen:{turn.id}"
        me = self.client.user
        if me is None:  # not logged in (closing): no message can be told to be ours
            return None, False
        assert turn.finished_at is not None, "a done or failed turn has finished_at (complete_turn, fail_turn)"
        finished = turn.finished_at.replace(microsecond=turn.finished_at.microsecond // 1000 * 1000)  # snowflakes count ms
        try:
            async for m in channel.history(limit=FOUND_POST_LOOKBACK, after=turn.created_at):
                if m.author.id != me.id:
                    continue
                ids = {getattr(c, "custom_id", None) for row in m.components for c in getattr(row, "children", [row])}
                if cancel in ids:
                    return m.id, False
                if regen in ids and m.created_at >= finished:
                    return m.id, True
        except discord.Forbidden:  # no Read Message History here: the nonce is all there is
            log.info("turn %s: cannot read channel %s's history to look for its message", turn.id, channel.id)
        return None, False

    async def _failed(self, turn: Post, channel, error: BaseException) -> None:
        """A try failed: wait and try again, or after the last try give the turn up, say so in the
        channel, and let the later turns go."""
        why = f"{type(error).__name__}: {error}"[:300]
        tries = turn.post_attempts + 1
        if tries <= len(self.retry_delays):
            delay = self.retry_delays[tries - 1]
            log.warning("turn %s: posting failed (%s); try %d again in %.0f s", turn.id, why, tries + 1, delay)
            await posting.postpone(self.service(), turn.id, timedelta(seconds=delay), why)
            self.metrics.post_retries.inc()
            return
        log.error("turn %s: posting failed %d times (%s); giving up on it", turn.id, tries, why)
        await self._mark_posted(turn.id, None, why)
        self.metrics.post_giveups.inc()
        self.board.posted(turn.id)
        notice = L_("Turn #%(seq)s could not be posted: Discord kept failing. It is kept in /history.", seq=turn.seq)
        async with locale.public(self.languages, turn.guild_id, turn.channel_id):
            embed = status_embed(turn, state="not posted", note=notice)
            content = fit(notice, CONTENT_MAX)
        if turn.status_message_id and channel is not None:
            with contextlib.suppress(TimeoutError, discord.HTTPException, OSError):
                await self.edits.final(channel.id, turn.status_message_id, embed=embed, view=None, attachments=[])
        try:
            await self.board.channel(turn.channel_id, turn.guild_id).send(content)
        except (TimeoutError, discord.HTTPException, OSError) as e:
            log.info("turn %s: the notice could not be posted either: %s", turn.id, e)
        self.wake()  # the later turns of this channel may go now

    async def _mark_posted(self, turn_id: int, message_id: int | None, error: str | None = None) -> None:
        await posting.posted(self.service(), turn_id, message_id, error)
