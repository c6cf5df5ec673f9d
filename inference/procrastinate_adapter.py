"""Every use of procrastinate beyond its public API, in one module.

procrastinate (3.10, schema vendored in migrations/) runs the turn queue. Its public API covers
the App, tasks, the JobManager's methods and the connector; what it does not cover is used here
only, so an upgrade has one file to check (tests/queue/test_procrastinate_adapter.py fails,
naming the version, when any of it changes):

- its versioned SQL functions, called on the *app's* SQLAlchemy session so a turn and its job
  commit together: `procrastinate_defer_jobs_v1`, `procrastinate_cancel_job_v1`,
  `procrastinate_retry_job_v2`, `procrastinate_finish_job_v1`;
- its tables' columns (`procrastinate_jobs.status/worker_id/lock/args/task_name/queue_name`,
  `procrastinate_workers.id/last_heartbeat`) for the sweep, the heartbeat and queue positions;
- its fetch's rules (`procrastinate_fetch_job_v2`: a lock's jobs one at a time, by priority then
  id), which `fetch_fair` keeps while it chooses across locks in the fair order;
- one private worker hook, `Worker._persist_job_status` and `Worker._new_job_event` (fetch again
  as soon as a job ends), and `Worker._running_jobs` (how many turns run, for /healthz).

The worker's JobManager (inference.job_manager.ResilientJobManager, which rides through database
outages) overrides public methods only; the SQL it runs on procrastinate's tables (heartbeat,
re-registering, stray jobs, finishing a job still `doing`) is here.
"""

from __future__ import annotations

import json

import procrastinate
import psycopg
import psycopg.rows
from procrastinate import jobs as procrastinate_jobs
from procrastinate import worker as procrastinate_worker
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

SUPPORTED_VERSION = "3.10"  # the release whose schema migrations/ vendors and whose internals this module uses


def installed_version() -> str:
    return procrastinate.__version__


def check_version() -> None:
    """Raise if the installed procrastinate is not the release this module was written against."""
    v = installed_version()
    if not (v == SUPPORTED_VERSION or v.startswith(SUPPORTED_VERSION + ".")):
        raise RuntimeError(
            f"procrastinate {v} is installed; inference/procrastinate_adapter.py uses the internals of "
            f"{SUPPORTED_VERSION} (SQL functions, tables, Worker._persist_job_status): re-check them and "
            "add a migration with the new release's sql/migrations/"
        )


# --- its SQL functions, on the app's session (same transaction as the turn)

_DEFER = text(
    """
    SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW(
        CAST(:queue AS varchar), CAST(:task AS varchar), CAST(:priority AS integer),
        CAST(:lock AS text), CAST(NULL AS text), CAST(:args AS jsonb), CAST(NULL AS timestamptz)
    )]::procrastinate_job_to_defer_v1[])) AS id
    """
)


async def defer_job(s: AsyncSession, *, queue: str, task: str, priority: int, lock: str | None, args: dict) -> int:
    """Insert a job in the caller's transaction (procrastinate's insert trigger NOTIFYs the
    workers at commit). Returns the job id."""
    return await s.scalar(_DEFER, {"queue": queue, "task": task, "priority": priority, "lock": lock, "args": json.dumps(args)})


async def cancel_job(s: AsyncSession, job_id: int) -> bool:
    """Cancel a job no worker has taken yet; False if it is running or finished."""
    return await s.scalar(text("SELECT procrastinate_cancel_job_v1(:id, false, false)"), {"id": job_id}) is not None


async def cancel_stale_jobs(s: AsyncSession, *, lock: str, task: str) -> int:
    """Cancel the waiting jobs of `task` under `lock` whose turn (`args.turn_id`) no longer waits
    for them: gone, no longer queued, or queued with another job. Returns how many were cancelled."""
    rows = await s.execute(
        text(
            """
            SELECT procrastinate_cancel_job_v1(j.id, false, false)
              FROM procrastinate_jobs j
              LEFT JOIN turns t ON t.id = (j.args->>'turn_id')::bigint
             WHERE j.status = 'todo' AND j.lock = :lock AND j.task_name = :task
               AND (t.id IS NULL OR t.status <> 'queued' OR t.job_id IS DISTINCT FROM j.id)
            """
        ),
        {"lock": lock, "task": task},
    )
    return sum(1 for (job_id,) in rows if job_id is not None)


async def retry_job_now(s: AsyncSession, job_id: int) -> None:
    """A `doing` (or failed) job back to `todo`, runnable at once; same id, so it keeps its place
    among its lock's jobs."""
    await s.execute(text("SELECT procrastinate_retry_job_v2(:id, now(), NULL, NULL, NULL)"), {"id": job_id})


async def finish_job(s: AsyncSession, job_id: int, status: str = "succeeded") -> None:
    await s.execute(text("SELECT procrastinate_finish_job_v1(:id, CAST(:st AS procrastinate_job_status), false)"),
                    {"id": job_id, "st": status})


# The server's start time bounds how stale a heartbeat may look for reasons other than death:
# after a restart every worker's last heartbeat predates it.
_HEARTBEAT_AGE = "now() - GREATEST(w.last_heartbeat, pg_postmaster_start_time())"


async def dead_workers_jobs(s: AsyncSession, stalled_after: float) -> list[int]:
    """`doing` jobs whose worker has sent no heartbeat for `stalled_after` seconds (counted from
    the server's start at the earliest) or has no row at all; locked FOR UPDATE."""
    return list(
        (
            await s.scalars(
                text(
                    f"""
                    SELECT j.id FROM procrastinate_jobs j
                      LEFT JOIN procrastinate_workers w ON w.id = j.worker_id
                     WHERE j.status = 'doing'
                       AND (w.id IS NULL OR {_HEARTBEAT_AGE} > make_interval(secs => :secs))
                     ORDER BY j.id
                     FOR UPDATE OF j
                    """
                ),
                {"secs": stalled_after},
            )
        ).all()
    )


async def prune_dead_workers(s: AsyncSession, stalled_after: float) -> list[int]:
    """Delete the rows of workers silent for `stalled_after` seconds (their jobs' worker_id goes
    NULL; dead_workers_jobs then finds them)."""
    return list(
        (
            await s.scalars(
                text(
                    f"""
                    DELETE FROM procrastinate_workers w
                     WHERE {_HEARTBEAT_AGE} > make_interval(secs => :secs)
                    RETURNING w.id
                    """
                ),
                {"secs": stalled_after},
            )
        ).all()
    )


async def forgotten_jobs(s: AsyncSession, grace: float) -> list[int]:
    """`doing` generation jobs whose turn already has its final state (done, failed, cancelled)
    since `grace` seconds or no longer exists: the worker's own status write was lost. Locked."""
    return list(
        (
            await s.scalars(
                text(
                    """
                    SELECT j.id FROM procrastinate_jobs j
                      LEFT JOIN turns t ON t.id = (j.args->>'turn_id')::bigint
                     WHERE j.status = 'doing' AND j.task_name = 'generate_turn'
                       AND (t.id IS NULL
                            OR (t.status IN ('done', 'failed', 'cancelled')
                                AND coalesce(t.finished_at, t.created_at) < now() - make_interval(secs => :grace)))
                     ORDER BY j.id
                     FOR UPDATE OF j SKIP LOCKED
                    """
                ),
                {"grace": grace},
            )
        ).all()
    )


async def turns_without_live_job(s: AsyncSession) -> list[int]:
    """Queued or running turns whose job has ended (any final status) or vanished: nothing will
    ever run them."""
    return list(
        (
            await s.scalars(
                text(
                    """
                    SELECT t.id FROM turns t LEFT JOIN procrastinate_jobs j ON j.id = t.job_id
                     WHERE t.status IN ('queued', 'running') AND t.job_id IS NOT NULL
                       AND (j.id IS NULL OR j.status IN ('succeeded', 'failed', 'aborted', 'cancelled'))
                     ORDER BY t.id
                    """
                )
            )
        ).all()
    )


async def turn_job(s: AsyncSession, turn_id: int):
    """A turn's status with its job's id, status, priority and queue (None columns: no job)."""
    return (
        await s.execute(
            text(
                """
                SELECT t.status AS turn_status, j.id, j.status, j.priority, j.queue_name
                  FROM turns t LEFT JOIN procrastinate_jobs j ON j.id = t.job_id
                 WHERE t.id = :id
                """
            ),
            {"id": turn_id},
        )
    ).first()


# --- the fair order (docs/queue.md, "Fair order")
#
# A free worker takes, among the jobs procrastinate's own fetch would allow (a lock's first waiting
# job, by priority then id, when none of the lock's jobs runs), the job of the server with the
# earliest virtual start on that job's queue, and within that server the channel served least
# recently. A server's virtual start is max(its pass, the queue's clock); taking its turn moves
# the clock there and its pass 1 / weight further (stride scheduling). A job taken again (its
# worker died, or it failed transiently: procrastinate counts `attempts`) is the same turn, so
# it moves neither. Fetches are serialised by an advisory lock, so each one sees what the one
# before it took.

FAIR_FETCH_LOCK = 7061638

_FAIR_FETCH = """
WITH firsts AS (
    SELECT DISTINCT ON (coalesce(j.lock, 'job:' || j.id)) j.id, j.queue_name, j.priority, j.lock, j.scheduled_at, j.args
      FROM procrastinate_jobs j
     WHERE j.status = 'todo'
     ORDER BY coalesce(j.lock, 'job:' || j.id), j.priority DESC, j.id
), heads AS (
    SELECT f.id, f.queue_name, f.priority,
           CASE WHEN t.status = 'queued' THEN s.guild_id END AS guild_id,
           CASE WHEN t.status = 'queued' THEN s.channel_id END AS channel_id
      FROM firsts f
      LEFT JOIN turns t ON t.id = (f.args->>'turn_id')::bigint
      LEFT JOIN game_sessions s ON s.id = t.session_id
     WHERE (%(queues)s::varchar[] IS NULL OR f.queue_name = ANY(%(queues)s::varchar[]))
       AND (f.scheduled_at IS NULL OR f.scheduled_at <= now())
       AND (f.lock IS NULL OR NOT EXISTS (
            SELECT 1 FROM procrastinate_jobs d WHERE d.lock = f.lock AND d.status = 'doing'))
), choices AS (
    SELECT DISTINCT ON (h.queue_name, h.guild_id) h.*, coalesce(c.vtime, 0) AS vtime,
           greatest(coalesce(sh.pass, 0), coalesce(c.vtime, 0)) AS tag
      FROM heads h
      LEFT JOIN queue_clocks c ON c.queue_name = h.queue_name
      LEFT JOIN queue_shares sh ON sh.queue_name = h.queue_name AND sh.guild_id = h.guild_id
      LEFT JOIN queue_channels qc ON qc.queue_name = h.queue_name AND qc.channel_id = h.channel_id
     ORDER BY h.queue_name, h.guild_id, h.priority DESC, qc.taken NULLS FIRST, h.id
), pick AS (
    SELECT id, queue_name, guild_id, channel_id, tag FROM choices
     ORDER BY priority DESC, guild_id IS NOT NULL, tag - vtime, id
     LIMIT 1
), taken AS (
    UPDATE procrastinate_jobs j SET status = 'doing', worker_id = %(worker_id)s
      FROM pick WHERE j.id = pick.id AND j.status = 'todo'
    RETURNING j.*
), charged AS (  -- (only when a server's turn was taken for the first time: a retry costs nothing more)
    SELECT p.* FROM pick p JOIN taken t ON t.id = p.id WHERE p.guild_id IS NOT NULL AND t.attempts = 0
), clock AS (
    INSERT INTO queue_clocks (queue_name, vtime) SELECT queue_name, tag FROM charged
    ON CONFLICT (queue_name) DO UPDATE SET vtime = greatest(queue_clocks.vtime, EXCLUDED.vtime)
), share AS (
    INSERT INTO queue_shares (queue_name, guild_id, pass)
    SELECT c.queue_name, c.guild_id, c.tag + 1.0 / coalesce(g.weight, 1)
      FROM charged c LEFT JOIN guild_shares g ON g.guild_id = c.guild_id
    ON CONFLICT (queue_name, guild_id) DO UPDATE SET pass = EXCLUDED.pass
), channel AS (
    INSERT INTO queue_channels (queue_name, channel_id, taken) SELECT queue_name, channel_id, tag FROM charged
    ON CONFLICT (queue_name, channel_id) DO UPDATE SET taken = EXCLUDED.taken
)
SELECT taken.*, pick.id AS picked FROM pick LEFT JOIN taken ON taken.id = pick.id
"""


async def fetch_fair(connector: procrastinate.PsycopgConnector, queues, worker_id: int) -> dict | None:
    """Take the next job in the fair order (marked `doing` for `worker_id`), or None. One
    transaction, pipelined (one round trip, then the commit): the advisory lock, then the choice
    and the take in one statement, whose snapshot (READ COMMITTED: taken when it starts, once the
    lock is held) sees what the previous fetch took."""
    params = {"queues": None if queues is None else list(queues), "worker_id": worker_id}
    for _ in range(3):  # the chosen job was cancelled or taken meanwhile: choose again
        async with connector.pool.connection() as conn, conn.pipeline():
            # The lock on a cursor of its own: a cursor that ran both statements returns the first
            # one's rows on psycopg 3.1 (the last one's on later releases).
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (FAIR_FETCH_LOCK,))
            async with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
                await cur.execute(_FAIR_FETCH, params)
                rows = await cur.fetchall()
        if not rows:
            return None
        if rows[0]["id"] is not None:
            return rows[0]
    return None


# Where each waiting turn stands in that order, in closed form: a server's k-th next turn (its
# sessions' turns in round-robin over its channels, least recently served first) starts at
# virtual time max(pass, clock) + k / weight; turns run in order of that, then of their job id.
_FAIR_POSITIONS = """
WITH queues AS (
    SELECT DISTINCT j.queue_name FROM procrastinate_jobs j JOIN turns t ON t.job_id = j.id WHERE t.id = ANY(:ids)
), waiting AS (
    SELECT j.id, j.queue_name, j.priority, j.lock, t.id AS turn_id, s.guild_id, s.channel_id,
           row_number() OVER (PARTITION BY j.queue_name, j.lock ORDER BY j.priority DESC, j.id) AS round,
           min(j.id) OVER (PARTITION BY j.queue_name, j.lock) AS first_id
      FROM procrastinate_jobs j
      JOIN turns t ON t.job_id = j.id AND t.status = 'queued'
      JOIN game_sessions s ON s.id = t.session_id
     WHERE j.status = 'todo' AND j.task_name = :task AND j.queue_name IN (SELECT queue_name FROM queues)
), ranked AS (
    SELECT w.*, row_number() OVER (PARTITION BY w.queue_name, w.guild_id
                                   ORDER BY w.round, qc.taken NULLS FIRST, w.first_id) - 1 AS k
      FROM waiting w
      LEFT JOIN queue_channels qc ON qc.queue_name = w.queue_name AND qc.channel_id = w.channel_id
), tagged AS (
    SELECT r.turn_id, r.queue_name, r.priority, r.id,
           greatest(coalesce(sh.pass, 0), coalesce(c.vtime, 0)) + r.k / coalesce(g.weight, 1) AS tag
      FROM ranked r
      LEFT JOIN queue_clocks c ON c.queue_name = r.queue_name
      LEFT JOIN queue_shares sh ON sh.queue_name = r.queue_name AND sh.guild_id = r.guild_id
      LEFT JOIN guild_shares g ON g.guild_id = r.guild_id
)
SELECT turn_id, position FROM (
    SELECT turn_id, row_number() OVER (PARTITION BY queue_name ORDER BY priority DESC, tag, id) AS position
      FROM tagged
) ordered
 WHERE turn_id = ANY(:ids)
"""

_FIFO_POSITIONS = """
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


async def queued_turn_positions(s: AsyncSession, task: str, turn_ids: list[int], *, fair: bool = True) -> dict[int, int]:
    """Each of these queued turns' rank among the waiting jobs of `task` on its job's queue, in
    the order workers take them (the fair order, or priority then id); turns not waiting are
    left out."""
    rows = await s.execute(text(_FAIR_POSITIONS if fair else _FIFO_POSITIONS), {"task": task, "ids": turn_ids})
    return {r.turn_id: int(r.position) for r in rows}


async def job_turn_id(s: AsyncSession, job_id: int) -> int | None:
    v = await s.scalar(text("SELECT (args->>'turn_id')::bigint FROM procrastinate_jobs WHERE id = :id"), {"id": job_id})
    return int(v) if v is not None else None


# --- the worker's own rows and jobs (inference.job_manager.ResilientJobManager)


def worker_row_missing(e: BaseException) -> bool:
    """procrastinate_fetch_job_v2 refused our worker id: its row was deleted (a sweep)."""
    cause = e.__cause__ or e
    return getattr(cause, "sqlstate", None) == "23503" and "procrastinate_jobs_worker_id_fkey" in str(cause)


async def fetch_fair_job(connector: procrastinate.PsycopgConnector, queues, worker_id: int) -> procrastinate_jobs.Job | None:
    """`fetch_fair`'s job, as procrastinate's worker takes it."""
    row = await fetch_fair(connector, queues, worker_id)
    return None if row is None else procrastinate_jobs.Job.from_row(row)


async def beat(conn: psycopg.AsyncConnection, worker_id: int) -> bool:
    """The worker's heartbeat; False if its row is gone."""
    cur = await conn.execute("UPDATE procrastinate_workers SET last_heartbeat = now() WHERE id = %s", (worker_id,))
    return cur.rowcount > 0


async def reregister_worker(connector: procrastinate.BaseConnector, worker_id: int, held: list[int]) -> None:
    """Put back a worker row (same id) and re-attach the `doing` jobs it holds."""
    await connector.execute_query_async(
        query="""
        INSERT INTO procrastinate_workers (id, last_heartbeat) OVERRIDING SYSTEM VALUE VALUES (%(worker_id)s, now())
        ON CONFLICT (id) DO UPDATE SET last_heartbeat = now()
        """,
        worker_id=worker_id,
    )
    await connector.execute_query_async(
        query="""
        UPDATE procrastinate_jobs SET worker_id = %(worker_id)s
         WHERE id = ANY(%(held)s) AND status = 'doing' AND worker_id IS NULL
        """,
        worker_id=worker_id, held=held,
    )


async def stray_jobs(connector: procrastinate.BaseConnector, worker_id: int, held: list[int]) -> list[int]:
    """`doing` jobs the database says this worker holds, other than `held` (a lost fetch answer)."""
    rows = await connector.execute_query_all_async(
        query="""
        SELECT id FROM procrastinate_jobs
         WHERE worker_id = %(worker_id)s AND status = 'doing' AND NOT (id = ANY(%(held)s))
        """,
        worker_id=worker_id, held=held,
    )
    return [r["id"] for r in rows]


async def finish_doing_job(connector: procrastinate.BaseConnector, job_id: int | None, status: str, delete_job: bool) -> None:
    """procrastinate_finish_job_v1, but only on a job still `doing` (the function also finishes a
    `todo` job)."""
    await connector.execute_query_async(
        query="""
        SELECT procrastinate_finish_job_v1(j.id, %(status)s::procrastinate_job_status, %(delete_job)s)
          FROM (SELECT id FROM procrastinate_jobs WHERE id = %(job_id)s AND status = 'doing' FOR UPDATE) j
        """,
        job_id=job_id, status=status, delete_job=delete_job,
    )


class TurnWorker(procrastinate_worker.Worker):
    """procrastinate's worker, fetching again as soon as a job ends: the finished job held a
    session lock that the session's next turn may be waiting for."""

    async def _persist_job_status(self, *args, **kwargs):
        await super()._persist_job_status(*args, **kwargs)
        self._new_job_event.set()

    def running_jobs(self) -> int:
        return len(self._running_jobs)
