"""Posts finished turns to their channels, each exactly once, and relays progress.

A dedicated LISTEN connection (db.listen) wakes the poster when a turn finishes and feeds progress
to the status board; the scheduler's sweep (bot.maintenance) and every (re)connection wake it too,
for anything missed while the bot or its connection was down.

Exactly once: a turn is claimed in the database (claim_unposted, leased) before it is sent, and
marked posted after. A crash between the send and mark_posted leaves a claim that expires and a
turn that is sent again: the message nonce (from the turn id and its generation's seed) with
enforce_nonce makes Discord return the first message instead of creating a second.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
import socket
from datetime import timedelta

import discord

from bot.embeds import failed_embed, turn_embed
from bot.views import RegenerateButton, view_of
from db import notify
from db import turns as turn_service
from db.models import GameSession, Turn
from game.catalogue import display_film
from game.errors import size_text

log = logging.getLogger(__name__)


def message_nonce(turn: Turn) -> str:
    """Stable for one generation of a turn, new after a regeneration (new seed); <= 25 chars."""
    return hashlib.blake2b(f"{turn.id}:{turn.seed}:{turn.status}".encode(), digest_size=12).hexdigest()


class Notifier:
    def __init__(self, bot, *, lease: timedelta = timedelta(minutes=2), claimant: str | None = None) -> None:
        self.bot = bot
        self.lease = lease
        self.claimant = claimant or f"bot:{socket.gethostname()}:{os.getpid()}"
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self._closed = False

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._listen(), name="notifier-listen"),
            asyncio.create_task(self._poster(), name="notifier-poster"),
        ]

    async def close(self) -> None:
        self._closed = True
        if not self._tasks:
            return
        for t in self._tasks:
            t.cancel()
        # Bounded: a connection to a database that vanished can take long to tear down.
        await asyncio.wait(self._tasks, timeout=5)

    def wake(self) -> None:
        self._wake.set()

    # --- listening

    async def _on_connect(self) -> None:
        self.wake()  # sweep for what finished while we were not listening

    async def _listen(self) -> None:
        from db.listen import Listener

        delay = 1.0
        while not self._closed:
            try:
                async with Listener(
                    self.bot.db.url, [notify.TURN_FINISHED, notify.TURN_PROGRESS, notify.TURN_QUEUED],
                    on_connect=self._on_connect,
                ) as listener:
                    delay = 1.0
                    async for n in listener:
                        if n.channel == notify.TURN_FINISHED:
                            self.wake()
                        elif n.channel == notify.TURN_PROGRESS:
                            p = n.payload
                            self.bot.board.progress(int(p["turn_id"]), int(p["channel_id"]), float(p["progress"]), p.get("stage"))
                        # A turn queued, started (its first progress), finished or cancelled can
                        # move the queue; the refresh is coalesced and edits only what changed.
                        self.bot.board.positions_changed()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the database is down: keep trying; the sweep covers the gap
                log.warning("notifier cannot LISTEN (%s); retrying in %.0f s", e, delay)
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)

    # --- posting

    async def _poster(self) -> None:
        await self.bot.wait_until_ready()  # channels are known only after READY
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
        were posted. A turn that cannot be sent now is released, and later turns of its session
        wait for it, so a channel always gets its turns in order."""
        if not self.bot.is_ready():
            return 0
        posted = 0
        async with self._lock:
            while True:
                guild_ids = [g.id for g in self.bot.guilds]
                if not guild_ids:
                    return posted
                async with self.bot.db.sessions.begin() as s:
                    claimed = await turn_service.claim_unposted(s, self.claimant, self.lease, guild_ids=guild_ids)
                if not claimed:
                    return posted
                blocked: set[int] = set()
                for turn in claimed:
                    ok = turn.session_id not in blocked and await self._post(turn.id)
                    if ok:
                        posted += 1
                    else:
                        blocked.add(turn.session_id)
                        async with self.bot.db.sessions.begin() as s:
                            await turn_service.release_claim(s, turn.id)
                if blocked:
                    return posted  # try again at the next wake-up or sweep, not in a tight loop

    def upload_limit(self, guild: discord.Guild | None) -> int:
        if guild is None:
            return 10 * 1024 * 1024
        return self.bot.upload_limits.get(guild.id) or guild.filesize_limit

    async def _post(self, turn_id: int) -> bool:
        async with self.bot.db.sessions() as s:
            turn = await turn_service.get_turn(s, turn_id, blobs=True)
            gs = await s.get(GameSession, turn.session_id)
        if turn.status not in ("done", "failed") or turn.posted_at is not None:
            return True  # regenerated or posted by someone else since the claim: nothing to send
        film = display_film(gs.film_id)
        channel = self.bot.get_channel(gs.channel_id)
        if channel is None:
            try:
                channel = await self.bot.fetch_channel(gs.channel_id)
            except (discord.NotFound, discord.Forbidden):
                log.warning("turn %s: channel %s is gone or hidden; not posting it", turn.id, gs.channel_id)
                await self._mark_posted(turn.id, None)
                return True

        view = view_of(RegenerateButton(turn.id))
        nonce = message_nonce(turn)
        if turn.status == "failed":
            embed, files = failed_embed(turn, film), []
        else:
            limit = self.upload_limit(getattr(channel, "guild", None))
            note = None
            if turn.mp4 is None:
                note = "The clip is no longer stored." if turn.blobs_pruned_at else "This turn has no clip."
            elif len(turn.mp4) > limit:
                note = f"The clip ({size_text(len(turn.mp4))}) is larger than this server's upload limit ({size_text(limit)}), so it is not attached."
            embed = turn_embed(turn, film, clip_note=note)
            files = [] if note else [discord.File(io.BytesIO(turn.mp4), filename=f"turn-{turn.seq}.mp4")]
        try:
            try:
                msg = await channel.send(embed=embed, files=files, view=view, nonce=nonce)
            except discord.HTTPException as e:
                if e.status != 413 or not files:
                    raise
                # The server's limit was lower than we knew: post the turn without its clip.
                embed = turn_embed(turn, film, clip_note=f"The clip ({size_text(len(turn.mp4))}) is larger than this server's upload limit, so it is not attached.")
                msg = await channel.send(embed=embed, view=view, nonce=nonce + "n")
        except (discord.NotFound, discord.Forbidden) as e:
            log.warning("turn %s: cannot post in channel %s (%s); giving up on it", turn.id, gs.channel_id, e)
            await self._mark_posted(turn.id, None)
            return True
        except (discord.HTTPException, OSError, asyncio.TimeoutError) as e:
            log.warning("turn %s: posting failed (%s); will retry", turn.id, e)
            return False
        await self._mark_posted(turn.id, msg.id)
        await self.bot.board.finish(turn, turn.status, channel_id=gs.channel_id, jump_url=msg.jump_url)
        return True

    async def _mark_posted(self, turn_id: int, message_id: int | None) -> None:
        async with self.bot.db.sessions.begin() as s:
            await turn_service.mark_posted(s, turn_id, message_id)
