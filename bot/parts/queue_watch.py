"""The bot's view of the turn queues for its metrics: every `interval` seconds (and once at start),
the turns waiting per film and the oldest one's age (service.queue_stats.waiting_by_film) go into
animegamer_queue_depth{film} / animegamer_queue_oldest_seconds{film}, and whether the query
reached the database into animegamer_database_up.

Every catalogue film has a series from the first refresh on (0 while nothing waits), so a drained
queue reads 0 rather than a gap. The queues are the whole deployment's, not a shard's: several
bot processes export the same figures (the dashboard takes the max per film).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bot.parts.metrics import BotMetrics
from bot.parts.service_args import Service
from game.catalogue import FILMS
from service.queue_stats import waiting_by_film
from service.runtime import outage

log = logging.getLogger(__name__)

INTERVAL = 15.0  # seconds: Prometheus's default scrape interval in docker/monitoring/prometheus.yml
TIMEOUT = 10.0  # seconds for one refresh's query


class QueueWatch:
    def __init__(self, service: Service, metrics: BotMetrics, *, interval: float = INTERVAL) -> None:
        self.service, self.metrics = service, metrics  # the game service is made at each refresh: a bot may have no database yet
        self.interval = interval
        self.refreshes = 0  # successful refreshes so far (tests)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="queue-watch")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def refresh(self) -> bool:
        """Read the queues once into the metrics; False (and database_up 0) if the database did
        not answer."""
        metrics = self.metrics
        try:
            async with asyncio.timeout(TIMEOUT):
                waiting = await waiting_by_film(self.service())
        except asyncio.CancelledError:
            raise
        except Exception as e:
            metrics.set_database_up(False)
            if outage(e) is not None or isinstance(e, TimeoutError):
                log.info("queue gauges not refreshed: the database is unreachable (%s)", e)
            else:
                log.warning("queue gauges not refreshed", exc_info=True)
            return False
        metrics.set_queue(waiting, films=FILMS)
        metrics.set_database_up(True)
        self.refreshes += 1
        return True

    async def _run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval)
