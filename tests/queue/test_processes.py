"""Real worker processes: ordering across workers, SIGKILL recovery, SIGTERM release."""

from __future__ import annotations

import asyncio
import itertools
import signal

from testkit.queue import (
    all_finished,
    job_rows,
    new_session,
    registered_workers,
    start_worker_process,
    stop_processes,
    submit,
    turn_rows,
    wait_until,
)


def _assert_strictly_ordered(rows) -> None:
    by_session: dict[int, list] = {}
    for t in rows:
        by_session.setdefault(t.session_id, []).append(t)
    for turns in by_session.values():
        turns.sort(key=lambda t: t.seq)
        for prev, nxt in itertools.pairwise(turns):
            # The next turn of a session starts only once the previous one is written.
            assert nxt.started_at >= prev.finished_at, (prev.seq, nxt.seq)
            # And it sees the previous result: its states start where the previous ones ended.
            assert nxt.states_before == prev.states_after


async def test_three_workers_keep_each_session_in_order(sessions, database_url, tmp_path):
    procs = [
        start_worker_process(database_url, "--no-render", "--preview-delay", "0.3", log_path=tmp_path / f"w{i}.log")
        for i in range(3)
    ]
    try:
        await wait_until(lambda: _count_at_least(sessions, 3), timeout=60)  # one turn worker per process
        games = [await new_session(sessions, 200 + i) for i in range(3)]
        for k in range(6):  # interleaved submissions, as players in three channels would
            for gs in games:
                await submit(sessions, gs, ("walk", "run", "talk", "eat", "sleep", "wave")[k])
        await wait_until(lambda: all_finished(sessions, 18), timeout=90)
        # Read the jobs before the workers unregister (worker_id goes NULL), once the last
        # one is marked (a moment after its turn's result is committed).
        jobs = await wait_until(lambda: _all_succeeded(sessions, 18))
    finally:
        stop_processes(procs)

    rows = await turn_rows(sessions)
    assert len(rows) == 18 and all(t.status == "done" and t.attempts == 1 for t in rows)
    _assert_strictly_ordered(rows)
    assert len(jobs) == 18 and all(j.status == "succeeded" for j in jobs)
    # Sessions ran in parallel on different workers.
    assert len({j.worker_id for j in jobs}) >= 2
    overlaps = sum(
        1 for a in rows for b in rows
        if a.session_id < b.session_id and a.started_at < b.finished_at and b.started_at < a.finished_at
    )
    assert overlaps > 0


async def _all_succeeded(sessions, n):
    jobs = await job_rows(sessions)
    return jobs if len(jobs) == n and all(j.status == "succeeded" for j in jobs) else None


async def _count_at_least(sessions, n):
    return await registered_workers(sessions) >= n


async def test_sigkill_mid_turn_is_recovered_exactly_once(sessions, database_url, tmp_path):
    # A worker that dies mid-turn leaves its job `doing`; the survivor's sweep (stalled after
    # 4 s without heartbeat) puts it back, and every turn completes exactly once.
    gs = await new_session(sessions, 300)
    for m in ("walk", "run", "sleep"):
        await submit(sessions, gs, m)
    victim = start_worker_process(database_url, "--no-render", "--preview-delay", "3", stalled_after=4, log_path=tmp_path / "victim.log")
    survivor = None
    try:
        first = await wait_until(lambda: _running(sessions), timeout=60)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        survivor = start_worker_process(database_url, "--no-render", "--preview-delay", "0.2", stalled_after=4, log_path=tmp_path / "survivor.log")
        await wait_until(lambda: all_finished(sessions, 3), timeout=60)
    finally:
        stop_processes([p for p in (victim, survivor) if p])

    rows = await turn_rows(sessions, gs.id)
    assert [t.status for t in rows] == ["done"] * 3
    assert [t.attempts for t in rows] == [2 if t.id == first.id else 1 for t in rows]
    _assert_strictly_ordered(rows)
    # The characters moved by exactly three results (none applied twice).
    st = 50
    for t in rows:
        st = max(0, min(100, st + 5 * t.delta_stamina))
    assert rows[-1].states_after["qiqi"]["stamina"] == st
    jobs = await job_rows(sessions)
    assert [j.status for j in jobs] == ["succeeded"] * 3


async def _running(sessions):
    rows = await turn_rows(sessions)
    running = [t for t in rows if t.status == "running"]
    return running[0] if running else None


async def test_sigterm_releases_the_running_turn(sessions, database_url, tmp_path):
    # With no grace, SIGTERM releases the turn: back to queued, its job back to todo; the next
    # worker generates it, in order, once.
    gs = await new_session(sessions, 400)
    for m in ("walk", "run"):
        await submit(sessions, gs, m)
    w1 = start_worker_process(database_url, "--no-render", "--preview-delay", "20", "--grace", "0", log_path=tmp_path / "w1.log")
    w2 = None
    try:
        running = await wait_until(lambda: _running(sessions), timeout=60)
        # the worker's own line once the turn is taken and its generation begins
        log = tmp_path / "w1.log"
        await wait_until(lambda: f"turn {running.id} (session" in log.read_text(errors="replace"), timeout=30, what="the worker's 'started' line")
        w1.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(w1.wait, 30) == 0
        rows = await turn_rows(sessions, gs.id)
        assert [t.status for t in rows] == ["queued", "queued"]
        assert [j.status for j in await job_rows(sessions)] == ["todo", "todo"]
        w2 = start_worker_process(database_url, "--no-render", log_path=tmp_path / "w2.log")
        await wait_until(lambda: all_finished(sessions, 2), timeout=60)
    finally:
        stop_processes([p for p in (w1, w2) if p])
    rows = await turn_rows(sessions, gs.id)
    assert [t.status for t in rows] == ["done", "done"]
    assert [t.attempts for t in rows] == [2, 1]
    _assert_strictly_ordered(rows)


async def test_a_long_turn_on_a_live_worker_is_never_taken_from_it(sessions, database_url, tmp_path):
    # Heartbeats come from the event loop while the backend runs in a thread: a turn 3.5 times
    # longer than stalled_after, with another worker sweeping every half second, runs once.
    gs = await new_session(sessions, 500)
    await submit(sessions, gs, "walk")
    procs = [
        start_worker_process(database_url, "--no-render", "--preview-delay", "7", stalled_after=2, log_path=tmp_path / f"w{i}.log")
        for i in range(2)
    ]
    try:
        await wait_until(lambda: all_finished(sessions, 1), timeout=60)
    finally:
        stop_processes(procs)
    (turn,) = await turn_rows(sessions, gs.id)
    assert turn.status == "done" and turn.attempts == 1
    assert [(j.status, j.attempts) for j in await job_rows(sessions)] == [("succeeded", 1)]
    logs = "".join((tmp_path / f"w{i}.log").read_text() for i in range(2))
    assert "dead worker" not in logs
