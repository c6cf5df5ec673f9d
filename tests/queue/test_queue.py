"""Queue operations without a worker: enqueue in the same transaction, cancellation, backlog
cap, queue position; and the worker command's start errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from db import sessions as session_service
from db.engine import describe_database_error, masked_url
from db.guilds import Limits
from db.models import GameSession, Turn
from game.stored_reasons import CANCELLED_BY_MODERATOR
from game.turn_errors import BacklogFull, TurnNotCancellable
from inference.queue import cancel_queued_turn, cancel_stale_jobs, queue_position, queue_positions
from testkit.queue import (
    ROOT,
    all_finished,
    job_rows,
    new_session,
    submit,
    turn_rows,
    wait_until,
    worker_env,
)
from tests.ports import free_port


async def _position(sessions, turn):
    async with sessions() as s:
        return await queue_position(s, await s.get(Turn, turn.id))


async def test_turn_and_job_are_written_together(sessions):
    gs = await new_session(sessions, 500)
    t = await submit(sessions, gs, "walk")
    [job] = await job_rows(sessions)
    assert t.job_id == job.id and job.status == "todo"
    assert job.lock == f"session:{gs.id}" and job.args == {"turn_id": t.id}
    async with sessions() as s:
        assert await s.scalar(text("SELECT queue_name FROM procrastinate_jobs WHERE id = :i"), {"i": job.id}) == "film.qiqi"

    class Boom(Exception):
        pass

    with pytest.raises(Boom):  # a submission rolled back leaves neither a turn nor a job
        async with sessions() as s, s.begin():
            from game.catalogue import FILMS
            from game.instruction import build_instruction
            from inference.queue import make_enqueue
            from service import turn_queue as turn_service
            from testkit.queue import LIMITS, ready_made

            g = await s.get(GameSession, gs.id)
            ins = build_instruction(FILMS["qiqi"], ["qiqi"], "run", "town")
            await turn_service.submit_turn(s, g, 1, ready_made("u", ins), limits=LIMITS, enqueue=make_enqueue())
            raise Boom()
    assert len(await job_rows(sessions)) == 1 and len(await turn_rows(sessions)) == 1


async def test_queue_position_and_cancellation(sessions, start_worker):
    a = await new_session(sessions, 510)
    b = await new_session(sessions, 511, film="ponyo", character="ponyo")
    a1 = await submit(sessions, a, "walk")
    b1 = await submit(sessions, b, "swim", character="ponyo", background="sea")
    a2 = await submit(sessions, a, "run")
    a3 = await submit(sessions, a, "eat")
    assert [await _position(sessions, t) for t in (a1, b1, a2, a3)] == [1, 1, 2, 3]
    async with sessions() as s:  # the same, in one query
        assert await queue_positions(s, [a1.id, b1.id, a2.id, a3.id, 999]) == {a1.id: 1, b1.id: 1, a2.id: 2, a3.id: 3}

    async with sessions() as s, s.begin():  # a moderator cancels a2
        await cancel_queued_turn(s, await s.get(Turn, a2.id), CANCELLED_BY_MODERATOR)
    assert await _position(sessions, a2) is None
    assert await _position(sessions, a3) == 2
    async with sessions() as s:
        assert await queue_positions(s, [a2.id, a3.id]) == {a3.id: 2}
    jobs = {j.id: j.status for j in await job_rows(sessions)}
    assert jobs[a2.job_id] == "cancelled"

    await start_worker()
    await wait_until(lambda: all_finished(sessions, 4))
    rows = {t.id: t for t in await turn_rows(sessions)}
    assert [rows[t.id].status for t in (a1, b1, a2, a3)] == ["done", "done", "cancelled", "done"]
    assert rows[a2.id].error == CANCELLED_BY_MODERATOR
    assert rows[a3.id].states_before == rows[a1.id].states_after  # the cancelled turn changed nothing
    assert await _position(sessions, a3) is None
    async with sessions() as s, s.begin():
        with pytest.raises(TurnNotCancellable):
            await cancel_queued_turn(s, await s.get(Turn, a3.id))


async def test_backlog_cap(sessions):
    gs = await new_session(sessions, 520)
    cap = Limits(max_instruction_len=300, cooldown_seconds=0, backlog_cap=2)
    first = await submit(sessions, gs, "walk", limits=cap)
    await submit(sessions, gs, "run", limits=cap)
    with pytest.raises(BacklogFull):
        await submit(sessions, gs, "eat", limits=cap)
    assert len(await job_rows(sessions)) == 2  # the refused turn left no job
    async with sessions() as s, s.begin():
        await cancel_queued_turn(s, await s.get(Turn, first.id))
    await submit(sessions, gs, "eat", limits=cap)  # room again
    assert [j.status for j in await job_rows(sessions)] == ["cancelled", "todo", "todo"]


async def test_reset_cancels_the_sessions_jobs(sessions):
    gs = await new_session(sessions, 530)
    for m in ("walk", "run"):
        await submit(sessions, gs, m)
    async with sessions() as s, s.begin():
        g = await s.get(GameSession, gs.id)
        await session_service.reset(s, g, by=1)
        assert await cancel_stale_jobs(s, gs.id) == 2
    assert [j.status for j in await job_rows(sessions)] == ["cancelled", "cancelled"]


def test_worker_without_ffmpeg_says_so(database_url):
    env = worker_env(database_url, ffmpeg="/nonexistent/ffmpeg")
    r = subprocess.run(
        [sys.executable, "-m", "animegamer.cli", "worker", "--backend", "preview", "--metrics-port", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 2
    assert "ffmpeg" in r.stderr and "ANIMEGAMER_FFMPEG" in r.stderr


def test_worker_unknown_film_says_so(database_url):
    r = subprocess.run(
        [sys.executable, "-m", "animegamer.cli", "worker", "--film", "totoro", "--metrics-port", "0"],
        cwd=ROOT, env=worker_env(database_url), capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 2 and "totoro" in r.stderr


async def test_sweep_retries_stalled_jobs_and_fails_orphans(sessions):
    from inference.queue import LOST_TURN, fail_orphaned_turns, retry_stalled

    # A heartbeat's age counts from the server's start at the earliest, so "stalled" must be
    # shorter than the server's uptime: a minute, or less on a server the tests just started
    # (the embedded one), which gets at least a few seconds of uptime first.
    async def uptime_of_five_seconds():
        async with sessions() as s:
            up = await s.scalar(text("SELECT extract(epoch FROM clock_timestamp() - pg_postmaster_start_time())::float"))
        return up if up >= 5 else None

    uptime = await wait_until(uptime_of_five_seconds, timeout=30, what="five seconds of server uptime")
    stalled = min(60.0, uptime - 2)
    gs = await new_session(sessions, 540)
    t1 = await submit(sessions, gs, "walk")
    t2 = await submit(sessions, gs, "run")
    async with sessions() as s, s.begin():
        # A dead worker: registered long ago, holding t1's job; t2's job failed for good.
        wid = await s.scalar(text("INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now() - interval '1 hour') RETURNING id"))
        await s.execute(text("UPDATE procrastinate_jobs SET status = 'doing', worker_id = :w WHERE id = :j"), {"w": wid, "j": t1.job_id})
        await s.execute(text("UPDATE procrastinate_jobs SET status = 'failed' WHERE id = :j"), {"j": t2.job_id})
        live = await s.scalar(text("INSERT INTO procrastinate_workers DEFAULT VALUES RETURNING id"))
    async with sessions() as s, s.begin():
        assert await retry_stalled(s, stalled) == [t1.job_id]
        assert await retry_stalled(s, stalled) == []  # already back in the queue: not retried twice
        assert await fail_orphaned_turns(s) == [t2.id]
    jobs = {j.id: j for j in await job_rows(sessions)}
    assert jobs[t1.job_id].status == "todo" and jobs[t1.job_id].attempts == 1
    rows = {t.id: t for t in await turn_rows(sessions)}
    assert rows[t1.id].status == "queued" and rows[t2.id].status == "failed" and rows[t2.id].error == LOST_TURN
    async with sessions() as s, s.begin():  # a live worker's job is left alone
        await s.execute(text("UPDATE procrastinate_jobs SET status = 'doing', worker_id = :w WHERE id = :j"), {"w": live, "j": t1.job_id})
        assert await retry_stalled(s, stalled) == []


def _start_error(url: str) -> subprocess.CompletedProcess:
    """`animegamer worker` pointed at `url`, which it cannot use: its exit status and message."""
    return subprocess.run(
        [sys.executable, "-m", "animegamer.cli", "worker", "--metrics-port", "0"],
        cwd=ROOT, env=worker_env(url), capture_output=True, text=True, timeout=60,
    )


def test_worker_with_a_missing_database_says_so(database_url):
    # A database that does not exist is a configuration error (exit 2); an unreachable server is
    # not: the worker waits for it (tests/faults). Only the database name changes, whether the
    # test server is reached over TCP or (embedded) through a socket directory in `host=`.
    missing = make_url(database_url).set(database="agtest_no_such_database")
    r = _start_error(missing.render_as_string(hide_password=False))
    assert r.returncode == 2, r.stderr
    assert f"cannot use the database at {masked_url(missing.render_as_string(hide_password=False))}:" in r.stderr, r.stderr
    assert 'the server has no database "agtest_no_such_database"' in r.stderr, r.stderr


def test_worker_with_a_missing_socket_directory_names_it(database_url, tmp_path):
    # A Unix-socket URL whose directory does not exist (a typo, a server never started there):
    # the message names the database URL, its password masked, and the directory.
    nowhere = tmp_path / "no_such_socket_dir"
    url = (make_url(database_url).set(host=None, port=None, password="s3cret")
           .update_query_dict({"host": str(nowhere)}).render_as_string(hide_password=False))
    r = _start_error(url)
    assert r.returncode == 2, r.stderr
    assert f"cannot use the database at {masked_url(url)}:" in r.stderr and "***" in r.stderr, r.stderr
    assert f"the socket directory {nowhere} does not exist" in r.stderr and "s3cret" not in r.stderr, r.stderr


async def test_start_error_names_a_refused_host_port_and_a_missing_socket_file(tmp_path):
    # The worker waits for a server that refuses connections (transient) and stops on a missing
    # socket file; either way, once it says why, it names host:port or the socket file.
    from db.engine import make_engine

    port = free_port()
    cases = {
        f"postgresql://u:s3cret@127.0.0.1:{port}/agtest": f"nothing accepts connections at 127.0.0.1:{port}",
        f"postgresql://u@/agtest?host={tmp_path}&port={port}": f"there is no server socket {tmp_path}/.s.PGSQL.{port}",
    }
    for url, detail in cases.items():
        engine = make_engine(url)
        try:
            with pytest.raises(OSError) as caught:
                async with engine.connect():
                    pass
        finally:
            await engine.dispose()
        message = describe_database_error(url, caught.value)
        assert message.startswith(f"cannot use the database at {masked_url(url)}: {detail}"), message
        assert "s3cret" not in message, message


async def test_sweep_repairs_lost_status_writes_whatever_the_heartbeats(sessions):
    # A live worker (fresh heartbeat) whose job status write was lost: its turn is done but the
    # job is still `doing`, holding the session's lock. Another turn's job finished without its
    # turn's result. The sweep repairs both, without judging heartbeats at all.
    from inference.queue import LOST_TURN, sweep

    gs = await new_session(sessions, 541)
    t1 = await submit(sessions, gs, "walk")
    t2 = await submit(sessions, gs, "run")
    gs2 = await new_session(sessions, 542)
    t3 = await submit(sessions, gs2, "walk")
    async with sessions() as s, s.begin():
        live = await s.scalar(text("INSERT INTO procrastinate_workers DEFAULT VALUES RETURNING id"))
        await s.execute(text("UPDATE procrastinate_jobs SET status = 'doing', worker_id = :w WHERE id IN (:a, :b)"),
                        {"w": live, "a": t1.job_id, "b": t3.job_id})
        await s.execute(text("UPDATE turns SET status = 'done', finished_at = now() - interval '1 minute' WHERE id = :t"), {"t": t1.id})
        await s.execute(text("UPDATE turns SET status = 'running' WHERE id = :t"), {"t": t3.id})
        await s.execute(text("UPDATE procrastinate_jobs SET status = 'succeeded' WHERE id = :j"), {"j": t3.job_id})
    async with sessions() as s, s.begin():
        report = await sweep(s, 60, judge_heartbeats=False)
    assert report.finished == [t1.job_id] and report.lost == [t3.id] and report.retried == []
    jobs = {j.id: j for j in await job_rows(sessions)}
    assert jobs[t1.job_id].status == "succeeded" and jobs[t2.job_id].status == "todo"
    rows = {t.id: t for t in await turn_rows(sessions)}
    assert rows[t3.id].status == "failed" and rows[t3.id].error == LOST_TURN
    async with sessions() as s, s.begin():  # nothing left to repair
        assert not await sweep(s, 60)
