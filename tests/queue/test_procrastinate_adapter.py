"""The procrastinate internals inference/procrastinate_adapter.py relies on are still there.

Each assertion names the installed version, so an upgrade fails here, loudly, rather than in
production: check the adapter against the new release, then update SUPPORTED_VERSION.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import procrastinate
from procrastinate import manager as procrastinate_manager
from procrastinate import psycopg_connector
from procrastinate import worker as procrastinate_worker
from sqlalchemy import text

from inference import procrastinate_adapter as adapter

VERSION = procrastinate.__version__
WHY = f"procrastinate {VERSION} is installed; inference/procrastinate_adapter.py was written for {adapter.SUPPORTED_VERSION}"

# name -> identity arguments, as pg_get_function_identity_arguments prints them
SQL_FUNCTIONS = {
    "procrastinate_defer_jobs_v1": "jobs procrastinate_job_to_defer_v1[]",
    "procrastinate_cancel_job_v1": "job_id bigint, abort boolean, delete_job boolean",
    "procrastinate_retry_job_v2": "job_id bigint, retry_at timestamp with time zone, new_priority integer, "
                                  "new_queue_name character varying, new_lock character varying",
    "procrastinate_finish_job_v1": "job_id bigint, end_status procrastinate_job_status, delete_job boolean",
}
COLUMNS = {
    "procrastinate_jobs": {"id", "status", "worker_id", "lock", "args", "task_name", "queue_name", "priority", "attempts"},
    "procrastinate_workers": {"id", "last_heartbeat"},
    "procrastinate_events": {"job_id", "at"},
}


def test_installed_version_is_the_supported_one():
    adapter.check_version()  # raises with a message naming both versions
    assert VERSION.startswith(adapter.SUPPORTED_VERSION), WHY


def test_private_worker_internals_are_unchanged():
    params = list(inspect.signature(procrastinate_worker.Worker._persist_job_status).parameters)
    assert params == ["self", "job", "status", "retry_decision", "context", "job_result"], f"{WHY}: Worker._persist_job_status changed"
    source = inspect.getsource(procrastinate_worker.Worker)
    for needle in ("self._new_job_event = asyncio.Event()", "self._running_jobs: dict", "self._persist_job_status(",
                   "self.app.job_manager.fetch_job(", "self.app.job_manager.update_heartbeat(",
                   "self.app.job_manager.listen_for_jobs(", "self.app.job_manager.prune_stalled_workers(",
                   "self.app.job_manager.register_worker()", "self.app.job_manager.unregister_worker(",
                   "self.app.job_manager.list_jobs_to_abort_async()"):
        assert needle in source, f"{WHY}: the worker no longer does {needle!r}"


def test_overridden_job_manager_methods_keep_their_signatures():
    expected = {
        "fetch_job": ["self", "queues", "worker_id"],
        "update_heartbeat": ["self", "worker_id"],
        "finish_job": ["self", "job", "status", "delete_job"],
        "retry_job": ["self", "job", "retry_at", "priority", "queue", "lock"],
        "register_worker": ["self"],
        "unregister_worker": ["self", "worker_id"],
        "prune_stalled_workers": ["self", "seconds_since_heartbeat"],
        "listen_for_jobs": ["self", "on_notification", "queues"],
        "retry_job_by_id_async": ["self", "job_id", "retry_at", "priority", "queue", "lock"],
        "list_jobs_to_abort_async": ["self", "queue"],
        "delete_old_jobs": ["self", "nb_hours", "queue", "include_failed", "include_cancelled", "include_aborted"],
    }
    for name, params in expected.items():
        got = list(inspect.signature(getattr(procrastinate_manager.JobManager, name)).parameters)
        assert got[: len(params)] == params, f"{WHY}: JobManager.{name}{got}"
    # The pool checks connections before handing them out (the adapter counts on it).
    assert "check_connection" in inspect.getsource(psycopg_connector.PsycopgConnector._create_pool), WHY


def test_installed_schema_still_has_the_sql_functions():
    schema = (Path(procrastinate.__file__).parent / "sql" / "schema.sql").read_text()
    for name in SQL_FUNCTIONS:
        assert f"CREATE FUNCTION {name}(" in schema, f"{WHY}: its schema has no {name}"


async def test_migrated_database_has_the_functions_and_columns(sessions):
    async with sessions() as s:
        rows = dict(
            (await s.execute(text(
                "SELECT proname, pg_get_function_identity_arguments(oid) FROM pg_proc WHERE proname = ANY(:names)"
            ), {"names": list(SQL_FUNCTIONS)})).all()
        )
        for name, args in SQL_FUNCTIONS.items():
            assert rows.get(name) == args, f"{WHY}: {name}({rows.get(name)})"
        for table, cols in COLUMNS.items():
            have = set((await s.scalars(text(
                "SELECT column_name FROM information_schema.columns WHERE table_name = :t"), {"t": table})).all())
            assert cols <= have, f"{WHY}: {table} lacks {cols - have}"


def test_the_fair_fetch_still_mirrors_procrastinates_own():
    # adapter.fetch_fair keeps procrastinate_fetch_job_v2's rules (a lock's jobs one at a time, by
    # priority then id; todo, queue, scheduled_at) and only changes the order across locks.
    schema = (Path(procrastinate.__file__).parent / "sql" / "schema.sql").read_text()
    fetch = schema[schema.index("CREATE FUNCTION procrastinate_fetch_job_v2("):]
    fetch = " ".join(fetch[: fetch.index("$$;")].split())
    for rule in ("other_jobs.status = 'doing'", "other_jobs.priority > jobs.priority",
                 "other_jobs.priority = jobs.priority AND other_jobs.id < jobs.id", "jobs.status = 'todo'",
                 "(jobs.scheduled_at IS NULL OR jobs.scheduled_at <= now())",
                 "SET status = 'doing', worker_id = p_worker_id"):
        assert rule in fetch, f"{WHY}: procrastinate_fetch_job_v2 no longer has {rule!r}"
