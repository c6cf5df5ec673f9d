"""kill -9 of a worker mid-turn: seconds until the turn runs again on another worker.

Each trial: a victim `animegamer worker` takes a long turn; a survivor worker is running; the
victim gets SIGKILL; the figure is the time from the kill to the turn's second start (both read
on the database's clock), and to the victim's worker row being removed. Meanwhile a third worker
runs a turn three times longer than ANIMEGAMER_STALLED_AFTER on another film: it must finish with
one attempt (a live worker's long turn is never taken from it).

Run: PYTHONPATH=. python bench/kill9.py [--trials 3] [--stalled-after S]
Uses a throw-away database on ANIMEGAMER_TEST_PG (default postgresql://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

from _paths import ROOT  # noqa: F401  (first: keeps bench/ off the front of sys.path)

import argparse
import asyncio
import signal
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from db.engine import make_engine, make_sessionmaker  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from settings import Settings  # noqa: E402
from testkit.pg import fresh_database  # noqa: E402
from testkit.queue import new_session, start_worker_process, stop_processes, submit  # noqa: E402


async def poll(fn, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await fn()
        if value:
            return value
        await asyncio.sleep(interval)
    raise TimeoutError(f"not within {timeout} s")


async def scalar(sessions, sql: str, **params):
    async with sessions() as s:
        return await s.scalar(text(sql), params)


async def trial(url: str, sessions, n: int, stalled_after: float, logs: Path) -> tuple[float, float]:
    env = {"stalled_after": stalled_after}
    victim = start_worker_process(url, "--film", "qiqi", "--no-render", "--preview-delay", "600", log_path=logs / f"victim{n}.log", **env)
    survivor = None
    try:
        gs = await new_session(sessions, 9000 + n)
        turn = await submit(sessions, gs, "walk")
        await poll(lambda: scalar(sessions, "SELECT status = 'running' FROM turns WHERE id = :t", t=turn.id), 120)
        victim_id = await scalar(sessions, "SELECT worker_id FROM procrastinate_jobs WHERE id = :j", j=turn.job_id)
        survivor = start_worker_process(url, "--film", "qiqi", "--no-render", "--preview-delay", "0.5", log_path=logs / f"survivor{n}.log", **env)
        started = time.monotonic()
        await poll(lambda: scalar(sessions, "SELECT count(*) >= 2 FROM procrastinate_workers WHERE last_heartbeat > now() - interval '1 second'"), 120)
        # A sweeper judges heartbeats once it has reached the database for stalled_after seconds
        # (just after an outage, every heartbeat looks old); a long-running survivor is past that.
        await asyncio.sleep(max(0.0, stalled_after + 1 - (time.monotonic() - started)))

        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed_at = await scalar(sessions, "SELECT clock_timestamp()")
        await poll(lambda: scalar(sessions, "SELECT status = 'running' AND attempts = 2 FROM turns WHERE id = :t", t=turn.id), 120)
        rerun = await scalar(sessions, "SELECT EXTRACT(EPOCH FROM started_at - :k) FROM turns WHERE id = :t", t=turn.id, k=killed_at)
        await poll(lambda: scalar(sessions, "SELECT count(*) = 0 FROM procrastinate_workers WHERE id = :w", w=victim_id), 120)
        removed = await scalar(sessions, "SELECT EXTRACT(EPOCH FROM clock_timestamp() - :k)", k=killed_at)
        await poll(lambda: scalar(sessions, "SELECT status = 'done' FROM turns WHERE id = :t", t=turn.id), 120)
        return float(rerun), float(removed)
    finally:
        stop_processes([p for p in (victim, survivor) if p is not None])


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--stalled-after", type=float, default=Settings(_env_file=None).stalled_after)
    args = ap.parse_args()
    stalled = args.stalled_after
    logs = Path(tempfile.mkdtemp(prefix="bench-kill9-"))
    with fresh_database("agbench") as url:
        engine = make_engine(url)
        await upgrade(engine)
        sessions = make_sessionmaker(engine)
        # The long turn on a live worker (another film's queue, so it never takes the victims' turns).
        long_delay = 3 * stalled
        long_worker = start_worker_process(url, "--film", "ponyo", "--no-render", "--preview-delay", str(long_delay),
                                           log_path=logs / "long.log", stalled_after=stalled)
        try:
            gs = await new_session(sessions, 8999, film="ponyo", character="ponyo")
            long_turn = await submit(sessions, gs, "walk", character="ponyo")
            print(f"stalled_after = {stalled:g} s (heartbeat every {stalled / 4:g} s); a {long_delay:g} s turn runs on a live worker meanwhile")
            figures = []
            for n in range(args.trials):
                rerun, removed = await trial(url, sessions, n, stalled, logs)
                figures.append(rerun)
                print(f"trial {n + 1}: kill -9 -> turn running again on the survivor: {rerun:5.2f} s; dead worker's row removed after {removed:5.2f} s")
            print(f"kill -9 -> re-run: median {statistics.median(figures):.2f} s, max {max(figures):.2f} s over {len(figures)} trials")
            await poll(lambda: scalar(sessions, "SELECT status = 'done' FROM turns WHERE id = :t", t=long_turn.id), long_delay + 120)
            attempts = await scalar(sessions, "SELECT attempts FROM turns WHERE id = :t", t=long_turn.id)
            print(f"the {long_delay:g} s turn on the live worker: {attempts} attempt(s) ({'never re-run' if attempts == 1 else 'RE-RUN: a live worker lost its turn'})")
        finally:
            stop_processes([long_worker])
            await engine.dispose()
    print(f"worker logs: {logs}")


if __name__ == "__main__":
    asyncio.run(main())
