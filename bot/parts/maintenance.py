"""The bot's scheduled jobs (APScheduler): the notifier's sweep for turns whose NOTIFY was missed,
and the jobs of service.maintenance (written there once for both faces): pausing idle sessions
and sessions whose film was withdrawn from the catalogue, pruning old clips and representations,
members' deletion requests and servers that removed the bot. The bot adds the pause notices,
which are public: each is written in its server's language.

A process running some of the bot's shards (bot.parts.shards) pauses and prunes only its shards'
servers' sessions (its `claim`): each server's are left to the process that has its shard,
which alone can tell its channel, and waits for it while it is down."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

import discord
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.parts import locale
from bot.parts.embeds import CONTENT_MAX, fit
from bot.parts.locale import Speaker
from bot.parts.privacy import PrivacyJobs
from bot.parts.service_args import Service
from bot.parts.shards import ShardClaim
from bot.parts.status import StatusBoard
from game.errors import FilmWithdrawn
from i18n import ngettext
from service import maintenance
from settings import Settings

log = logging.getLogger(__name__)


class Guilds(Protocol):
    """The discord client, as far as the pause notices read it."""

    @property
    def guilds(self) -> Sequence[discord.Guild]: ...


# Every job: missed runs coalesce into one, never two at once, late runs still run.
_EACH_RUN = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}


class Maintenance:
    def __init__(self, client: Guilds, *, service: Service, settings: Settings, languages: Speaker, claim: ShardClaim,
                 board: StatusBoard, privacy: PrivacyJobs, wake_notifier: Callable[[], None], sweep_seconds: float = 30.0,
                 idle_check_seconds: float = 60.0, prune_hours: float = 6.0) -> None:
        """service: the game service; languages: the servers' languages (bot.parts.locale); claim:
        this process's shards (bot.parts.shards); board: where a pause notice is sent (its
        channel); privacy: the privacy jobs (bot.parts.privacy); wake_notifier: the sweep."""
        self.client, self.service, self.settings, self.languages, self.claim = client, service, settings, languages, claim
        self.board, self.privacy_jobs, self.wake_notifier = board, privacy, wake_notifier
        self.sweep_seconds = sweep_seconds
        self.idle_check_seconds = idle_check_seconds
        self.prune_hours = prune_hours
        self.scheduler = AsyncIOScheduler()

    def start(self) -> None:
        self.scheduler.add_job(self.sweep, "interval", seconds=self.sweep_seconds, id="sweep", **_EACH_RUN)
        self.scheduler.add_job(self.pause_idle, "interval", seconds=self.idle_check_seconds, id="pause_idle", **_EACH_RUN)
        self.scheduler.add_job(self.prune, "interval", hours=self.prune_hours, id="prune", **_EACH_RUN)
        # At start (next_run_time=now) and with the idle check: a film removed from the catalogue
        # while sessions use it pauses them, with a message in their channels.
        self.scheduler.add_job(self.pause_withdrawn, "interval", seconds=self.idle_check_seconds, id="pause_withdrawn",
                               next_run_time=datetime.now(UTC), **_EACH_RUN)
        # Members' deletion requests (also woken by /privacy delete) and servers that removed the
        # bot (bot/parts/privacy.py), at start and then every minute / hour.
        self.scheduler.add_job(self.privacy, "interval", seconds=self.idle_check_seconds, id="privacy",
                               next_run_time=datetime.now(UTC), **_EACH_RUN)
        self.scheduler.add_job(self.departed, "interval", hours=1, id="departed", next_run_time=datetime.now(UTC), **_EACH_RUN)
        self.scheduler.start()

    def repeat(self, job_id: str, func: Callable[[], Awaitable[object]], seconds: float) -> None:
        """Run `func` every `seconds` with the maintenance jobs (a run not overlapping the last one),
        until `stop(job_id)`."""
        self.scheduler.add_job(func, "interval", seconds=seconds, id=job_id, **_EACH_RUN)

    def stop(self, job_id: str) -> None:
        """Stop a job started by `repeat` (none: nothing to stop)."""
        if self.scheduler.get_job(job_id) is not None:
            self.scheduler.remove_job(job_id)

    def close(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    async def sweep(self) -> None:
        self.wake_notifier()

    async def privacy(self) -> list[int]:
        return await self.privacy_jobs.process_requests()

    async def departed(self, now: datetime | None = None) -> list[int]:
        return await self.privacy_jobs.delete_departed(now=now)

    def wake_privacy(self) -> None:
        """Run the deletion requests' job now (a member just confirmed one)."""
        if self.scheduler.running and self.scheduler.get_job("privacy") is not None:
            self.scheduler.modify_job("privacy", next_run_time=datetime.now(UTC))

    async def pause_idle(self) -> list[int]:
        minutes = round(self.settings.idle_pause_minutes)

        def text(gs: maintenance.ToPause) -> str:
            return ngettext("No turn for %(n)s minute. This game is paused (idle). A moderator can resume it with /mod resume.",
                            "No turn for %(n)s minutes. This game is paused (idle). A moderator can resume it with /mod resume.",
                            minutes)

        return await maintenance.pause_idle(self.service(), claim=self.claim, tell=self._teller("idle", text))

    async def pause_withdrawn(self) -> list[int]:
        return await maintenance.pause_withdrawn(self.service(), claim=self.claim,
                                                 tell=self._teller("withdrawn-film", lambda gs: FilmWithdrawn(gs.film_id).message))

    def _teller(self, what: str, notice: Callable[[maintenance.ToPause], str]) -> maintenance.Tell:
        """A pause's notice in its game's channel (service.maintenance pauses after it), `notice(gs)`
        called in the server's language. A notice Discord fails to take for now (5xx, timeout)
        leaves its game active until the next check; one it refuses for good (no access, channel
        gone) does not hold the pause back, since the refusal will not change."""
        mine = {g.id for g in self.client.guilds}

        async def tell(gs: maintenance.ToPause) -> bool:
            if gs.guild_id not in mine:  # a guild the bot has left has no channel to tell
                return True
            try:
                async with locale.public(self.languages, gs.guild_id, gs.channel_id):
                    text = fit(notice(gs), CONTENT_MAX)
                await self.board.channel(gs.channel_id, gs.guild_id).send(text)
            except (TimeoutError, discord.DiscordServerError, OSError) as e:
                log.warning("%s pause of session %s waits: its notice failed for now (%s)", what, gs.id, e)
                return False
            except discord.HTTPException as e:
                log.warning("%s pause of session %s: the notice was refused (%s); pausing anyway", what, gs.id, e)
            return True

        return tell

    async def prune(self) -> int:
        return await maintenance.prune_clips(self.service(), claim=self.claim)
