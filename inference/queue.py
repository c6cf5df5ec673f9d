"""The turn queue: procrastinate on the app's own Postgres.

One job per turn, `generate_turn(turn_id)`, on the queue of the session's film (`film.<id>`) with
`lock = "session:<id>"`: procrastinate runs jobs that share a lock one at a time, in priority then
id order, so one session's turns run strictly in order while other sessions run in parallel on
other workers. Every turn job has the same priority (0), so within a session the order is the
submission order.

The bot defers the job with the SQL function procrastinate itself uses, on the SQLAlchemy
session that inserts the turn (`make_enqueue`): the turn and its job are committed together or
not at all.

Recovery: procrastinate does not retry the jobs of a worker that died. A periodic task
(`retry_stalled_jobs`, no lock, on the `maintenance` queue) puts the jobs of workers whose
heartbeat is older than `stalled_after` back to `todo`; the turn then runs again from the start
(db.turns.start_turn accepts a turn left `running`, and complete_turn writes one result).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable

import procrastinate
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from db import turns as turn_service
from db.engine import libpq_url
from db.models import GameSession, Turn
from db.turns import Enqueue

log = logging.getLogger(__name__)

GENERATE_TURN = "generate_turn"
RETRY_STALLED = "retry_stalled_jobs"
PRUNE_JOBS = "prune_finished_jobs"
MAINTENANCE_QUEUE = "maintenance"
TURN_PRIORITY = 0  # one priority for every turn: within a lock, procrastinate orders by priority first
_RETRY_LOCK_KEY = 7061637  # advisory lock: one stalled-job sweep at a time across the fleet


def film_queue(film_id: str) -> str:
    return f"film.{film_id}"


def session_lock(session_id: int) -> str:
    return f"session:{session_id}"


# --- deferring, from the bot (or the play page), in the caller's transaction

_DEFER = text(
    """
    SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW(
        CAST(:queue AS varchar), CAST(:task AS varchar), CAST(:priority AS integer),
        CAST(:lock AS text), CAST(NULL AS text), CAST(:args AS jsonb), CAST(NULL AS timestamptz)
    )]::procrastinate_job_to_defer_v1[])) AS id
    """
)


async def defer_turn(s: AsyncSession, turn_id: int, session_id: int, film_id: str, priority: int = TURN_PRIORITY) -> int:
    """Insert the generation job of a turn on the session `s` (committed with the caller's
    transaction; procrastinate's insert trigger NOTIFYs the workers at commit). Returns the job id."""
    return await s.scalar(
        _DEFER,
        {
            "queue": film_queue(film_id),
            "task": GENERATE_TURN,
            "priority": priority,
            "lock": session_lock(session_id),
            "args": json.dumps({"turn_id": turn_id}),
        },
    )


def make_enqueue(priority: int = TURN_PRIORITY) -> Enqueue:
    """The `enqueue` hook for db.turns.submit_turn and regenerate_latest."""

    async def enqueue(s: AsyncSession, turn: Turn, gs: GameSession) -> int:
        return await defer_turn(s, turn.id, gs.id, gs.film_id, priority)

    return enqueue


# --- moderation: cancelling queued turns and their jobs


async def cancel_job(s: AsyncSession, job_id: int) -> bool:
    """Cancel a job that no worker has taken yet. False if it is running or finished."""
    return await s.scalar(text("SELECT procrastinate_cancel_job_v1(:id, false, false)"), {"id": job_id}) is not None


async def cancel_queued_turn(s: AsyncSession, turn: Turn, reason: str = "cancelled by a moderator") -> Turn:
    """Cancel a queued turn and its job in the caller's transaction. Raises
    game.errors.TurnNotCancellable if the turn is no longer queued. Should a worker have taken
    the job a moment ago, it finds the turn cancelled and does nothing."""
    turn = await turn_service.cancel_turn(s, turn, reason)
    if turn.job_id is not None:
        await cancel_job(s, turn.job_id)
    return turn


async def cancel_stale_jobs(s: AsyncSession, session_id: int) -> int:
    """Cancel the waiting jobs of a session whose turns no longer need them (e.g. after
    db.sessions.cancel_pending or reset). Such jobs would only find nothing to do, but they hold
    the session's place in the queue meanwhile."""
    rows = await s.execute(
        text(
            """
            SELECT procrastinate_cancel_job_v1(j.id, false, false)
              FROM procrastinate_jobs j
              LEFT JOIN turns t ON t.id = (j.args->>'turn_id')::bigint
             WHERE j.lock = :lock AND j.status = 'todo' AND j.task_name = :task
               AND (t.id IS NULL OR t.status <> 'queued' OR t.job_id IS DISTINCT FROM j.id)
            """
        ),
        {"lock": session_lock(session_id), "task": GENERATE_TURN},
    )
    return sum(1 for (job_id,) in rows if job_id is not None)


async def queue_position(s: AsyncSession, turn: Turn) -> int | None:
    """Where a turn stands in its film's queue: 0 while it runs, n >= 1 when n - 1 queued turns
    of its film will be taken before it, None when it is finished, cancelled or has no job.

    (A turn also waits for the earlier turns of its own session, which the position counts when
    they are queued on the same film, as they always are.)"""
    row = (
        await s.execute(
            text(
                """
                SELECT t.status AS turn_status, j.id, j.status, j.priority, j.queue_name
                  FROM turns t LEFT JOIN procrastinate_jobs j ON j.id = t.job_id
                 WHERE t.id = :id
                """
            ),
            {"id": turn.id},
        )
    ).first()
    if row is None or row.turn_status not in ("queued", "running"):
        return None
    if row.turn_status == "running" or row.status == "doing":
        return 0
    if row.id is None or row.status != "todo":
        return None
    ahead = await s.scalar(
        text(
            """
            SELECT count(*) FROM procrastinate_jobs j
              JOIN turns t ON t.job_id = j.id AND t.status = 'queued'
             WHERE j.queue_name = :queue AND j.status = 'todo' AND j.task_name = :task
               AND (j.priority > :priority OR (j.priority = :priority AND j.id < :id))
            """
        ),
        {"queue": row.queue_name, "task": GENERATE_TURN, "priority": row.priority, "id": row.id},
    )
    return int(ahead) + 1


async def queue_positions(s: AsyncSession, turn_ids: Iterable[int]) -> dict[int, int]:
    """queue_position of many queued turns in one query (the turns not waiting are left out):
    each waiting job's rank in its film's queue, the order workers take them."""
    ids = list(turn_ids)
    if not ids:
        return {}
    rows = await s.execute(
        text(
            """
            SELECT turn_id, position FROM (
                SELECT t.id AS turn_id,
                       row_number() OVER (PARTITION BY j.queue_name ORDER BY j.priority DESC, j.id) AS position
                  FROM procrastinate_jobs j JOIN turns t ON t.job_id = j.id AND t.status = 'queued'
                 WHERE j.status = 'todo' AND j.task_name = :task
                   AND j.queue_name IN (SELECT j2.queue_name FROM procrastinate_jobs j2 JOIN turns t2 ON t2.job_id = j2.id
                                         WHERE t2.id = ANY(:ids))
            ) ranked
             WHERE turn_id = ANY(:ids)
            """
        ),
        {"task": GENERATE_TURN, "ids": ids},
    )
    return {r.turn_id: int(r.position) for r in rows}


# --- retries


class TurnReleased(Exception):
    """The worker stopped before finishing a turn; the turn was put back in the queue."""


# Failures that say nothing about the turn itself: the database went away for a moment.
TRANSIENT = (sa_exc.OperationalError, sa_exc.InterfaceError, ConnectionError, OSError)


class TurnRetry(BaseRetryStrategy):
    """A released turn goes back at once (same job, so it keeps its place in the session's
    order); a turn that hit a transient database error is retried a few times; anything else
    was already recorded on the turn as its failure."""

    max_attempts = 5

    def get_retry_decision(self, *, exception: BaseException, job) -> RetryDecision | None:
        # (A cancellation outside the backend's run, e.g. while the result is being written,
        # is a shutdown too: the turn runs again and complete_turn keeps one result.)
        if isinstance(exception, (TurnReleased, asyncio.CancelledError)):
            return RetryDecision(retry_in={"seconds": 0})
        if isinstance(exception, TRANSIENT) and job.attempts < self.max_attempts:
            return RetryDecision(retry_in={"seconds": 2 * (job.attempts + 1)})
        return None


# --- the app and its tasks


async def _generate_turn(context: procrastinate.JobContext, turn_id: int) -> str:
    runner = context.additional_context["turn_runner"]
    return await runner.run(turn_id, job_id=context.job.id)


async def retry_stalled(s: AsyncSession, stalled_after: float) -> list[int]:
    """Put the running jobs of dead workers (no heartbeat for `stalled_after` seconds, or no
    worker row at all) back to `todo`. Serialised by an advisory lock, and each job row is
    re-read under it, so two sweeps never retry the same job twice (the second would pull a
    job from under the worker that took it after the first)."""
    await s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _RETRY_LOCK_KEY})
    ids = (
        await s.scalars(
            text(
                """
                SELECT j.id FROM procrastinate_jobs j
                  LEFT JOIN procrastinate_workers w ON w.id = j.worker_id
                 WHERE j.status = 'doing'
                   AND (w.id IS NULL OR w.last_heartbeat < now() - make_interval(secs => :secs))
                 ORDER BY j.id
                 FOR UPDATE OF j
                """
            ),
            {"secs": stalled_after},
        )
    ).all()
    for job_id in ids:
        await s.execute(text("SELECT procrastinate_retry_job_v2(:id, now(), NULL, NULL, NULL)"), {"id": job_id})
    return list(ids)


LOST_TURN = "This turn was lost: its worker stopped with an error. Try again."


async def fail_orphaned_turns(s: AsyncSession) -> list[int]:
    """Fail the pending turns whose job ended without writing a result (its retries exhausted
    on database errors, say): they would otherwise count against the backlog forever."""
    ids = (
        await s.scalars(
            text(
                """
                SELECT t.id FROM turns t JOIN procrastinate_jobs j ON j.id = t.job_id
                 WHERE t.status IN ('queued', 'running') AND j.status IN ('failed', 'aborted')
                 ORDER BY t.id
                """
            )
        )
    ).all()
    return [i for i in ids if await turn_service.fail_turn(s, i, LOST_TURN)]


async def _retry_stalled_jobs(context: procrastinate.JobContext, timestamp: int) -> int:
    ctx = context.additional_context
    async with ctx["sessions"]() as s, s.begin():
        ids = await retry_stalled(s, ctx["stalled_after"])
        lost = await fail_orphaned_turns(s)
    if ids:
        log.warning("retried %d job(s) of stalled workers: %s", len(ids), ids)
    if lost:
        log.warning("failed %d turn(s) whose job ended without a result: %s", len(lost), lost)
    return len(ids)


async def _prune_finished_jobs(context: procrastinate.JobContext, timestamp: int) -> None:
    await context.app.job_manager.delete_old_jobs(
        nb_hours=24 * 7, include_failed=True, include_cancelled=True, include_aborted=True
    )


def retry_cron(stalled_after: float) -> str:
    """A cron (with seconds) that sweeps a few times per `stalled_after`."""
    period = max(1.0, stalled_after / 3)
    step = max(s for s in (1, 2, 3, 5, 10, 15, 20, 30) if s <= period)
    return f"* * * * * */{step}"


def make_app(url: str, *, stalled_after: float = 60.0, pool_size: int = 4) -> procrastinate.App:
    """A procrastinate App on `url` with the turn and maintenance tasks (open it with
    `async with app.open_async()`). Each process builds its own."""
    connector = procrastinate.PsycopgConnector(conninfo=libpq_url(url), min_size=1, max_size=pool_size)
    app = procrastinate.App(connector=connector)
    app.task(name=GENERATE_TURN, queue=film_queue("default"), pass_context=True, retry=TurnRetry())(_generate_turn)
    retry_task = app.task(name=RETRY_STALLED, queue=MAINTENANCE_QUEUE, pass_context=True)(_retry_stalled_jobs)
    app.periodic(cron=retry_cron(stalled_after), periodic_id="")(retry_task)
    prune_task = app.task(name=PRUNE_JOBS, queue=MAINTENANCE_QUEUE, pass_context=True)(_prune_finished_jobs)
    app.periodic(cron="17 * * * *", periodic_id="")(prune_task)
    return app


def queues_for(films: Iterable[str]) -> list[str]:
    return [film_queue(f) for f in films]

