"""The bot's scheduled jobs (APScheduler): the notifier's sweep for turns whose NOTIFY was missed,
pausing idle sessions and sessions whose film was withdrawn from the catalogue, and pruning old
clips and representations."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone

import discord
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from db import sessions as game_sessions
from db import turns as turn_service
from game.catalogue import FILMS
from game.errors import FilmWithdrawn, SessionPaused

log = logging.getLogger(__name__)


class Maintenance:
    def __init__(self, bot, *, sweep_seconds: float = 30.0, idle_check_seconds: float = 60.0, prune_hours: float = 6.0) -> None:
        self.bot = bot
        self.sweep_seconds = sweep_seconds
        self.idle_check_seconds = idle_check_seconds
        self.prune_hours = prune_hours
        self.scheduler = AsyncIOScheduler()

    def start(self) -> None:
        common = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}
        self.scheduler.add_job(self.sweep, "interval", seconds=self.sweep_seconds, id="sweep", **common)
        self.scheduler.add_job(self.pause_idle, "interval", seconds=self.idle_check_seconds, id="pause_idle", **common)
        self.scheduler.add_job(self.prune, "interval", hours=self.prune_hours, id="prune", **common)
        # At start (next_run_time=now) and with the idle check: a film removed from the catalogue
        # while sessions use it pauses them, with a message in their channels.
        self.scheduler.add_job(self.pause_withdrawn, "interval", seconds=self.idle_check_seconds, id="pause_withdrawn",
                               next_run_time=datetime.now(timezone.utc), **common)
        self.scheduler.start()

    def close(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    async def sweep(self) -> None:
        self.bot.notifier.wake()

    async def pause_idle(self) -> list[int]:
        idle = timedelta(minutes=self.bot.settings.idle_pause_minutes)
        try:
            async with self.bot.db.sessions.begin() as s:
                paused = await game_sessions.pause_idle(s, idle)
        except Exception as e:
            log.warning("pausing idle sessions failed: %s", e)
            return []
        mine = {g.id for g in self.bot.guilds}
        for gs in paused:
            if gs.guild_id not in mine:
                continue
            minutes = round(self.bot.settings.idle_pause_minutes)
            text = f"No turn for {minutes} minutes. {SessionPaused('idle').message}"
            try:
                await self.bot.board.channel(gs.channel_id, gs.guild_id).send(text)
            except (discord.HTTPException, OSError, asyncio.TimeoutError) as e:  # the other channels are still told
                log.warning("could not announce the idle pause in %s: %s", gs.channel_id, e)
        return [gs.id for gs in paused]

    async def pause_withdrawn(self) -> list[int]:
        try:
            async with self.bot.db.sessions.begin() as s:
                paused = await game_sessions.pause_withdrawn_films(s, set(FILMS))
        except Exception as e:
            log.warning("pausing the sessions of withdrawn films failed: %s", e)
            return []
        mine = {g.id for g in self.bot.guilds}
        for gs in paused:
            log.warning("session %s (channel %s) paused: its film %r is not in the film catalogue", gs.id, gs.channel_id, gs.film_id)
            if gs.guild_id not in mine:
                continue
            try:
                await self.bot.board.channel(gs.channel_id, gs.guild_id).send(FilmWithdrawn(gs.film_id).message)
            except discord.HTTPException as e:
                log.info("could not announce the withdrawn film in %s: %s", gs.channel_id, e)
        return [gs.id for gs in paused]

    async def prune(self) -> int:
        try:
            async with self.bot.db.sessions.begin() as s:
                n = await turn_service.prune_blobs(s, timedelta(days=self.bot.settings.blob_retention_days))
        except Exception as e:
            log.warning("pruning old clips failed: %s", e)
            return 0
        if n:
            log.info("pruned the clips of %d old turns", n)
        return n
