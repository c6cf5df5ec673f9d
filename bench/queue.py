"""Throughput and added latency of the turn queue: enqueue -> worker -> result -> NOTIFY.

Workers are real `animegamer worker` processes with the preview backend and rendering switched
off, so a turn costs the queue's own work only (fetch, start, result transaction, NOTIFY,
finish). Two measurements per worker count:

- loaded: 50 sessions play at once, each submitting its next turn when the previous one's
  NOTIFY arrives (closed loop); turns per second over the whole run, and per-turn latency
  (submission committed -> finished NOTIFY received), which here includes waiting behind the
  other sessions' turns;
- idle: one session, one turn at a time: the latency that the queue adds to a turn.

Run: PYTHONPATH=. python bench/queue.py [--workers 1 4] [--sessions 50] [--turns 8]
Uses a throw-away database on ANIMEGAMER_TEST_PG (default postgresql://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, where `queue.py` would shadow
# the standard library's queue module: drop it, and put the project root there instead.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import time

from sqlalchemy import text

from db import notify  # noqa: E402
from db import sessions as session_service  # noqa: E402
from db import turns as turn_service  # noqa: E402
from db.engine import make_engine, make_sessionmaker  # noqa: E402
from db.guilds import Limits  # noqa: E402
from db.listen import Listener  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.models import GameSession  # noqa: E402
from game.catalogue import FILMS  # noqa: E402
from game.instruction import build_instruction  # noqa: E402
from inference.queue import make_enqueue  # noqa: E402
from tests.pg import fresh_database  # noqa: E402

LIMITS = Limits(max_instruction_len=300, cooldown_seconds=0, backlog_cap=100)
MOTIONS = ("walk", "run", "talk", "eat", "sleep", "fly on broomstick")
TABLES = "turns, character_states, players, game_sessions, procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs, procrastinate_workers"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


class Bench:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url, pool_size=20, max_overflow=20)
        self.sessions = make_sessionmaker(self.engine)
        self.waiters: dict[int, asyncio.Future] = {}
        self.enqueue = make_enqueue()

    async def dispatch(self, listener: Listener) -> None:
        async for n in listener:
            fut = self.waiters.pop(n.payload.get("turn_id"), None)
            if fut is not None and not fut.done():
                fut.set_result(time.perf_counter())

    async def reset(self) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE"))

    async def new_session(self, channel_id: int) -> int:
        film = FILMS["qiqi"]
        async with self.sessions() as s, s.begin():
            gs = await session_service.start_session(s, 1, channel_id, film, created_by=1)
            await session_service.join(s, gs, film, 1, "bench", "qiqi")
        return gs.id

    async def play(self, session_id: int, turns: int, latencies: list[float]) -> None:
        film = FILMS["qiqi"]
        for k in range(turns):
            ins = build_instruction(film, ["qiqi"], MOTIONS[k % len(MOTIONS)], "town")
            loop = asyncio.get_running_loop()
            async with self.sessions() as s:
                async with s.begin():
                    gs = await s.get(GameSession, session_id)
                    turn = await turn_service.submit_turn(
                        s, gs, author_id=1, author_name="bench", instruction=ins, limits=LIMITS, enqueue=self.enqueue
                    )
                    fut = self.waiters[turn.id] = loop.create_future()
                committed = time.perf_counter()
            finished = await asyncio.wait_for(fut, 60)
            latencies.append(finished - committed)

    async def queue_waits(self) -> list[float]:
        async with self.sessions() as s:
            rows = await s.scalars(text("SELECT (timings->>'queue_wait')::float FROM turns WHERE status = 'done'"))
            return [r for r in rows if r is not None]

    async def workers_registered(self) -> int:
        async with self.sessions() as s:
            return await s.scalar(text("SELECT count(*) FROM procrastinate_workers"))


def start_workers(url: str, n: int) -> list[subprocess.Popen]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), ANIMEGAMER_DATABASE_URL=url, ANIMEGAMER_QUEUE_POLL_INTERVAL="0.3")
    cmd = [sys.executable, "-m", "animegamer.cli", "worker", "--backend", "preview", "--no-render", "--no-migrate", "--metrics-port", "0", "--film", "qiqi"]
    return [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


async def run(args) -> None:
    with fresh_database("agbench") as url:
        engine = make_engine(url)
        await upgrade(engine)
        await engine.dispose()
        bench = Bench(url)
        print(f"turn queue bench: preview backend, rendering off; {args.sessions} sessions x {args.turns} turns (closed loop)")
        print(f"{'workers':>7} {'turns/s':>8} {'loaded p50':>11} {'loaded p99':>11} {'idle p50':>9} {'idle p99':>9} {'queue_wait p50':>15} {'p99':>7}")
        for n in args.workers:
            await bench.reset()
            procs = start_workers(url, n)
            try:
                deadline = time.monotonic() + 60
                while await bench.workers_registered() < 2 * n:  # turn + maintenance worker each
                    if time.monotonic() > deadline:
                        raise RuntimeError("workers did not start")
                    await asyncio.sleep(0.1)
                async with Listener(url, [notify.TURN_FINISHED]) as listener:
                    dispatcher = asyncio.create_task(bench.dispatch(listener))
                    ids = [await bench.new_session(1000 + i) for i in range(args.sessions)]
                    loaded: list[float] = []
                    t0 = time.perf_counter()
                    await asyncio.gather(*(bench.play(i, args.turns, loaded) for i in ids))
                    elapsed = time.perf_counter() - t0
                    waits = await bench.queue_waits()
                    idle: list[float] = []
                    await bench.play(await bench.new_session(9999), args.idle_turns, idle)
                    dispatcher.cancel()
            finally:
                stop_workers(procs)
            ms = lambda v: f"{v * 1000:.0f} ms"  # noqa: E731
            print(
                f"{n:>7} {len(loaded) / elapsed:>8.1f} {ms(statistics.median(loaded)):>11} {ms(pct(loaded, 99)):>11} "
                f"{ms(statistics.median(idle)):>9} {ms(pct(idle, 99)):>9} {ms(statistics.median(waits)):>15} {ms(pct(waits, 99)):>7}"
            )
        await bench.engine.dispose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument("--turns", type=int, default=8, help="turns per session in the loaded run")
    p.add_argument("--idle-turns", type=int, default=30)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
