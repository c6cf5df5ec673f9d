"""The turn queue: procrastinate on the app's own Postgres.

One job per turn, `generate_turn(turn_id)`, on the queue of the session's film (`film.<id>`) with
`lock = "session:<id>"`: procrastinate runs jobs that share a lock one at a time, in priority then
id order, so one session's turns run strictly in order while other sessions run in parallel on
other workers. Every turn job has the same priority (0), so within a session the order is the
submission order.

The bot defers the job with the SQL function procrastinate itself uses, on the SQLAlchemy
session that inserts the turn (`make_enqueue`): the turn and its job are committed together or
not at all. (Everything of procrastinate beyond its public API goes through
inference/procrastinate_adapter.py.)

Recovery (`sweep`, run every few seconds by every worker process, one at a time fleet-wide):
procrastinate does not retry the jobs of a worker that died, so the sweep puts the jobs of
workers silent for `stalled_after` seconds back to `todo` (their turn back to `queued`) and
removes those workers' rows; it also repairs what a lost status write leaves behind, whatever the
heartbeats say: a job still `doing` though its turn has its result is finished, and a turn whose
job ended without a result is failed. A retried turn runs again from the start
(db.turn_results.start_turn accepts a turn left `running`, and complete_turn writes one result).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import procrastinate
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from db import turn_results
from db import turns as turn_service
from db.engine import libpq_url
from db.models import GameSession, Turn
from db.transient import DatabaseStatus, is_transient
from db.turns import Enqueue
from game import turn_texts
from game.stored_reasons import CANCELLED
from inference import job_manager
from inference import procrastinate_adapter as adapter

log = logging.getLogger(__name__)

GENERATE_TURN = "generate_turn"
TURN_PRIORITY = 0  # one priority for every turn: within a lock, procrastinate orders by priority first
_SWEEP_LOCK_KEY = 7061637  # advisory lock: one sweep at a time across the fleet


def film_queue(film_id: str) -> str:
    return f"film.{film_id}"


def session_lock(session_id: int) -> str:
    return f"session:{session_id}"


# --- deferring, from the bot (or the play page), in the caller's transaction


async def defer_turn(s: AsyncSession, turn_id: int, session_id: int, film_id: str, priority: int = TURN_PRIORITY) -> int:
    """Insert the generation job of a turn on the session `s` (committed with the caller's
    transaction; procrastinate's insert trigger NOTIFYs the workers at commit). Returns the job id."""
    return await adapter.defer_job(
        s, queue=film_queue(film_id), task=GENERATE_TURN, priority=priority, lock=session_lock(session_id),
        args={"turn_id": turn_id},
    )


def make_enqueue(priority: int = TURN_PRIORITY) -> Enqueue:
    """The `enqueue` hook for db.turns.insert_turn and requeue_finished (service.turn_queue)."""

    async def enqueue(s: AsyncSession, turn: Turn, gs: GameSession) -> int:
        return await defer_turn(s, turn.id, gs.id, gs.film_id, priority)

    return enqueue


# --- moderation: cancelling queued turns and their jobs


async def cancel_job(s: AsyncSession, job_id: int) -> bool:
    """Cancel a job that no worker has taken yet. False if it is running or finished."""
    return await adapter.cancel_job(s, job_id)


async def cancel_queued_turn(s: AsyncSession, turn: Turn, reason: str = CANCELLED) -> Turn:
    """Cancel a queued turn and its job in the caller's transaction; `reason`: a cancel code
    (game.stored_reasons). Raises game.turn_errors.TurnNotCancellable if the turn is no longer
    queued. Should a worker have taken the job a moment ago, it finds the turn cancelled and does
    nothing."""
    turn = await turn_service.cancel_turn(s, turn, reason)
    if turn.job_id is not None:
        await cancel_job(s, turn.job_id)
    return turn


async def cancel_stale_jobs(s: AsyncSession, session_id: int) -> int:
    """Cancel the waiting jobs of a session whose turns no longer need them (e.g. after
    db.sessions.cancel_pending or reset). Such jobs would only find nothing to do, but they hold
    the session's place in the queue meanwhile."""
    return await adapter.cancel_stale_jobs(s, lock=session_lock(session_id), task=GENERATE_TURN)


async def queue_position(s: AsyncSession, turn: Turn) -> int | None:
    """Where a turn stands in its film's queue: 0 while it runs, n >= 1 when n - 1 queued turns
    of its film will be taken before it in the fair order (docs/queue.md), None when it is
    finished, cancelled or has no job.

    (A turn also waits for the earlier turns of its own session, which the position counts when
    they are queued on the same film, as they always are.)"""
    row = await adapter.turn_job(s, turn.id)
    if row is None or row.turn_status not in ("queued", "running"):
        return None
    if row.turn_status == "running" or row.status == "doing":
        return 0
    if row.id is None or row.status != "todo":
        return None
    return (await queue_positions(s, [turn.id])).get(turn.id)


async def queue_positions(s: AsyncSession, turn_ids: Iterable[int]) -> dict[int, int]:
    """queue_position of many queued turns in one query (the turns not waiting are left out):
    each waiting job's rank in its film's queue, in the fair order workers take them (as it
    stands now: a newcomer's turn may pass ahead)."""
    ids = list(turn_ids)
    if not ids:
        return {}
    return await adapter.queued_turn_positions(s, GENERATE_TURN, ids)


# --- retries


class TurnReleased(Exception):
    """The worker stopped before finishing a turn; the turn was put back in the queue."""


class TurnRetry(BaseRetryStrategy):
    """A released turn goes back at once (same job, so it keeps its place in the session's
    order); a turn that hit a transient database error (db.transient) is retried a few times;
    anything else was already recorded on the turn as its failure."""

    max_attempts = 5

    def get_retry_decision(self, *, exception: BaseException, job) -> RetryDecision | None:
        # (A cancellation outside the backend's run, e.g. while the result is being written,
        # is a shutdown too: the turn runs again and complete_turn keeps one result.)
        if isinstance(exception, (TurnReleased, asyncio.CancelledError)):
            return RetryDecision(retry_in={"seconds": 0})
        if is_transient(exception) and job.attempts < self.max_attempts:
            return RetryDecision(retry_in={"seconds": 2 * (job.attempts + 1)})
        return None


# --- the app and its task


async def _generate_turn(context: procrastinate.JobContext, turn_id: int) -> str:
    runner = context.additional_context["turn_runner"]
    return await runner.run(turn_id, job_id=context.job.id)


LOST_TURN = turn_texts.LOST  # stored as a code, shown through the catalogs (game.turn_texts)
FINISHED_GRACE = 5.0  # seconds a finished turn's job may stay `doing` (its worker is writing the status)


@dataclass
class SweepReport:
    retried: list[int] = field(default_factory=list)  # jobs of dead workers, back to todo
    pruned_workers: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)  # jobs left doing after their turn's result
    lost: list[int] = field(default_factory=list)  # turns failed: their job ended without a result

    def __bool__(self) -> bool:
        return bool(self.retried or self.pruned_workers or self.finished or self.lost)


async def _sweep_lock(s: AsyncSession) -> bool:
    return bool(await s.scalar(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": _SWEEP_LOCK_KEY}))


async def retry_stalled(s: AsyncSession, stalled_after: float) -> list[int]:
    """Put the running jobs of dead workers (no heartbeat for `stalled_after` seconds, or no
    worker row at all) back to `todo`, and their turns back to `queued` (a player sees it waiting,
    not frozen mid-progress). Each job row is locked and re-read, so two sweeps never retry the
    same job twice."""
    ids = await adapter.dead_workers_jobs(s, stalled_after)
    for job_id in ids:
        await adapter.retry_job_now(s, job_id)
        turn_id = await adapter.job_turn_id(s, job_id)
        if turn_id is not None:
            await turn_results.requeue_turn(s, turn_id)
    return ids


async def finish_forgotten_jobs(s: AsyncSession, grace: float = FINISHED_GRACE) -> list[int]:
    """Finish the jobs still `doing` although their turn has its final state: the worker's status
    write was lost. Left `doing`, such a job would hold its session's lock for ever."""
    ids = await adapter.forgotten_jobs(s, grace)
    for job_id in ids:
        await adapter.finish_job(s, job_id, "succeeded")
    return ids


async def fail_orphaned_turns(s: AsyncSession) -> list[int]:
    """Fail the pending turns whose job ended without writing a result (or vanished): they would
    otherwise count against the backlog for ever."""
    ids = await adapter.turns_without_live_job(s)
    return [i for i in ids if await turn_results.fail_turn(s, i, LOST_TURN)]


async def sweep(s: AsyncSession, stalled_after: float, *, judge_heartbeats: bool = True) -> SweepReport:
    """One recovery pass, in the caller's transaction; a no-op while another sweep runs.

    `judge_heartbeats=False` skips declaring workers dead (the caller has itself been cut off
    from the database recently, so silent workers may only have been cut off too); the
    consistency repairs, which do not depend on heartbeats, always run."""
    report = SweepReport()
    if not await _sweep_lock(s):
        return report
    if judge_heartbeats:
        report.pruned_workers = await adapter.prune_dead_workers(s, stalled_after)
        report.retried = await retry_stalled(s, stalled_after)
    report.finished = await finish_forgotten_jobs(s)
    report.lost = await fail_orphaned_turns(s)
    return report


async def prune_finished_jobs(app: procrastinate.App, days: float = 7) -> None:
    """Delete finished jobs older than `days` (procrastinate's public JobManager call)."""
    await app.job_manager.delete_old_jobs(
        nb_hours=int(24 * days), include_failed=True, include_cancelled=True, include_aborted=True
    )


def sweep_interval(stalled_after: float) -> float:
    """Seconds between sweeps: a few per `stalled_after`, so a dead worker's turn is retried
    within about stalled_after + this."""
    return max(0.5, min(10.0, stalled_after / 4))


def heartbeat_interval(stalled_after: float) -> float:
    """Seconds between a worker's heartbeats: several per `stalled_after`, so a live worker
    (whose heartbeats come from its event loop while the backend runs in a thread) is never
    taken for dead."""
    return max(0.25, min(10.0, stalled_after / 4))


def make_app(url: str, *, pool_size: int = 4, status: DatabaseStatus | None = None,
             give_up: Callable[[], bool] = lambda: False, order: str = "fair") -> procrastinate.App:
    """A procrastinate App on `url` with the turn task (open it with `async with
    app.open_async()`). Each process builds its own. `order`: "fair" (docs/queue.md) or "fifo"
    (first come, first served: procrastinate's own order, kept for comparison)."""
    app = job_manager.make_app(libpq_url(url), pool_size=pool_size, status=status or DatabaseStatus("job queue"),
                           give_up=give_up, fair=order != "fifo")
    app.task(name=GENERATE_TURN, queue=film_queue("default"), pass_context=True, retry=TurnRetry())(_generate_turn)
    return app


def queues_for(films: Iterable[str]) -> list[str]:
    return [film_queue(f) for f in films]
