"""The worker's procrastinate JobManager, made to ride through a database outage instead of
stopping: fetching finds nothing, heartbeats and the LISTEN connection retry with backoff, job
status writes are retried until they land. It overrides the public JobManager's methods only;
its SQL over procrastinate's tables is inference.procrastinate_adapter's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import procrastinate
import psycopg
from procrastinate import manager as procrastinate_manager

from db.transient import DatabaseStatus, backoff, is_transient, retry_transient
from inference import procrastinate_adapter as adapter

log = logging.getLogger(__name__)


class ResilientJobManager(procrastinate_manager.JobManager):
    """procrastinate's JobManager, made to survive the database going away.

    - fetch_job: a transient error means "no job now" (the worker polls again);
    - update_heartbeat: on its own connection (not the pool), retried at the next beat; it also
      re-creates the worker's row if a sweep deleted it meanwhile (a long outage of this worker
      alone), re-attaches the jobs it holds, and hands back any job the database says it holds
      but it never received (a fetch whose answer was lost);
    - finish_job / retry_job: retried until they land (or `give_up()`), so a finished turn's
      job never stays `doing`; a job that is no longer `doing` (the sweep settled it or handed
      it back) is left alone;
    - listen_for_jobs: reconnects forever (polling covers the gap);
    - prune_stalled_workers: none at start (the sweep prunes, knowing about restarts);
    - list_jobs_to_abort_async: nothing to abort while the database is away;
    - register/unregister: retried / best effort.
    """

    def __init__(self, connector, *, conninfo: str, status: DatabaseStatus, give_up: Callable[[], bool],
                 fair: bool = True) -> None:
        super().__init__(connector)
        self.fair = fair  # False: procrastinate's own order (priority, then id), first come first served
        self.status = status
        self.give_up = give_up
        self.held: set[int] = set()  # job ids fetched and not yet finished or retried
        self._fetching = asyncio.Lock()
        self.conninfo = conninfo
        self._beat_conn: psycopg.AsyncConnection | None = None

    async def _transient(self, e: Exception, what: str) -> None:
        self.status.failed(e)
        log.debug("%s: transient database error: %s", what, e)

    async def fetch_job(self, queues, worker_id):
        async with self._fetching:
            try:
                job = await self._fetch(queues, worker_id)
            except Exception as e:
                if adapter.worker_row_missing(e):  # a sweep took us for dead while we were cut off
                    await self._reregister(worker_id)
                    return None
                if not is_transient(e):
                    raise
                await self._transient(e, "fetch_job")
                await asyncio.sleep(0.5)  # the worker loops straight back here when it gets None
                return None
            self.status.ok()
            if job is not None and job.id is not None:  # (a fetched job has its row id; only an unsaved one has none)
                self.held.add(job.id)
            return job

    async def _fetch(self, queues, worker_id: int):
        if not self.fair:
            return await super().fetch_job(queues, worker_id)
        connector = self.connector
        assert isinstance(connector, procrastinate.PsycopgConnector)  # make_app builds it
        return await adapter.fetch_fair_job(connector, queues, worker_id)

    async def update_heartbeat(self, worker_id: int) -> None:
        """The heartbeat goes over its own connection, not the pool: it says that this process
        is alive, which must stay true while the pool is busy re-filling after connections were
        killed (a stale heartbeat would let a sweep take our running turns)."""
        # (Nothing here may raise: procrastinate stops the worker when its heartbeat task dies.)
        try:
            updated = await self._beat(worker_id)
        except Exception as e:
            if is_transient(e):
                await self._transient(e, "heartbeat")
            else:
                log.exception("heartbeat failed")
            return
        self.status.ok()
        if not updated:
            await self._reregister(worker_id)
        try:
            async with self._fetching:
                await self._hand_back_strays(worker_id)
        except Exception as e:
            if is_transient(e):
                await self._transient(e, "heartbeat")
            else:
                log.exception("handing back stray jobs failed")

    async def _beat(self, worker_id: int) -> bool:
        for attempt in (1, 2):  # a connection killed since the last beat: one fresh try at once
            try:
                if self._beat_conn is None or self._beat_conn.closed:
                    self._beat_conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True, connect_timeout=5)
                return await adapter.beat(self._beat_conn, worker_id)
            except Exception as e:
                await self.close_heartbeat()
                if attempt == 2 or not is_transient(e):
                    raise
        return False

    async def close_heartbeat(self) -> None:
        conn, self._beat_conn = self._beat_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def _reregister(self, worker_id: int) -> None:
        """Put back the worker row a sweep deleted while this worker was cut off (same id), and
        re-attach the jobs it is still running."""
        log.warning("worker %d's row was removed while it was cut off; re-registering it", worker_id)
        try:
            await adapter.reregister_worker(self.connector, worker_id, sorted(self.held))
        except Exception as e:  # never let the heartbeat task die of it (procrastinate would stop the worker)
            if is_transient(e):
                await self._transient(e, "re-registering")
            else:
                log.exception("could not re-register worker %d", worker_id)

    async def _hand_back_strays(self, worker_id: int) -> None:
        for job_id in await adapter.stray_jobs(self.connector, worker_id, sorted(self.held)):
            log.warning("job %d is marked as ours but was never received (a lost fetch answer); putting it back", job_id)
            await super().retry_job_by_id_async(job_id, retry_at=datetime.now(UTC))

    async def _settle(self, what: str, fn) -> None:
        try:
            await retry_transient(fn, status=self.status, what=what, give_up=self.give_up)
        except Exception as e:
            if is_transient(e):
                raise
            if "Job was not found" in str(e.__cause__ or e):
                log.info("%s: the job was already settled by the sweep (%s)", what, e.__cause__ or e)
                return
            raise

    async def finish_job(self, job, status, delete_job) -> None:
        """Like procrastinate's, but only while the job is still `doing` (its function also
        finishes a `todo` job: one a sweep handed back meanwhile must run again, not end)."""

        await self._settle(f"finishing job {job.id}",
                           lambda: adapter.finish_doing_job(self.connector, job.id, status.value, delete_job))
        self.held.discard(job.id)

    async def retry_job(self, job, retry_at=None, priority=None, queue=None, lock=None) -> None:
        await self._settle(
            f"retrying job {job.id}",
            lambda: super(ResilientJobManager, self).retry_job(job, retry_at=retry_at, priority=priority, queue=queue, lock=lock),
        )
        self.held.discard(job.id)

    async def list_jobs_to_abort_async(self, queue=None):
        try:
            return await super().list_jobs_to_abort_async(queue)
        except Exception as e:
            if not is_transient(e):
                raise
            await self._transient(e, "abort poll")  # (procrastinate would log a traceback every 5 s)
            return []

    async def register_worker(self) -> int:
        return await retry_transient(super().register_worker, status=self.status, what="registering the worker")

    async def unregister_worker(self, worker_id: int) -> None:
        await self.close_heartbeat()
        try:
            await super().unregister_worker(worker_id)
        except Exception as e:
            if not is_transient(e):
                raise
            log.warning("could not unregister worker %d (%s); the sweep of another worker will remove it", worker_id, e)

    async def prune_stalled_workers(self, seconds_since_heartbeat: float) -> list[int]:
        return []

    async def listen_for_jobs(self, *, on_notification, queues=None) -> None:
        delays = backoff(0.5, 10.0)
        while True:
            try:
                await super().listen_for_jobs(on_notification=on_notification, queues=queues)
                delay = next(delays)
            except Exception as e:
                delay = next(delays)
                if is_transient(e):
                    await self._transient(e, "listen")
                else:
                    log.warning("job LISTEN connection failed (%s); polling meanwhile", e)
                log.info("job LISTEN connection lost; reconnecting in %.1f s", delay)
            await asyncio.sleep(delay)


def make_app(url: str, *, pool_size: int, status: DatabaseStatus, give_up: Callable[[], bool] = lambda: False,
             fair: bool = True) -> procrastinate.App:
    """A procrastinate App whose JobManager rides through outages and takes jobs in the fair order
    (`fair=False`: procrastinate's). (procrastinate's pool already checks each connection before
    handing it out, so one the server killed is replaced.)"""
    connector = procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=pool_size, timeout=5.0)
    app = procrastinate.App(connector=connector)
    app.job_manager = ResilientJobManager(connector, conninfo=url, status=status, give_up=give_up, fair=fair)
    return app
