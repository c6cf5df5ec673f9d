"""Throughput and added latency of the turn queue: enqueue -> worker -> result -> NOTIFY.

Workers are real `animegamer worker` processes with the preview backend and rendering switched
off, so a turn costs the queue's own work only (fetch, start, result transaction, NOTIFY,
finish). Three measurements per worker count:

- loaded: 50 sessions play at once, each submitting its next turn when the previous one's
  NOTIFY arrives (closed loop); turns per second over the whole run, and per-turn latency
  (submission committed -> finished NOTIFY received), which here includes waiting behind the
  other sessions' turns;
- idle: one session, one turn at a time: the latency that the queue adds to a turn;
- drain: every turn queued before the workers start; how fast they empty the queue (the
  client's own cost out of the loop).

Run: PYTHONPATH=. python bench/queue.py [--workers 1 4] [--sessions 50] [--turns 8]
     PYTHONPATH=. python bench/queue.py --idle-only [--rounds 3] [--idle-turns 30]: the idle
     latency under ANIMEGAMER_QUEUE_ORDER=fifo and fair, alternating (docs/queue.md)
Uses a throw-away database on ANIMEGAMER_TEST_PG (default postgresql://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

from _paths import ROOT  # first: keeps bench/queue.py from shadowing the stdlib

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time

from sqlalchemy import text

from db import notify  # noqa: E402
from db import sessions as session_service  # noqa: E402
from db.engine import make_engine, make_sessionmaker  # noqa: E402
from db.guilds import Limits  # noqa: E402
from db.listen import Listener  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.models import GameSession  # noqa: E402
from game.catalogue import FILMS  # noqa: E402
from game.instruction import build_instruction  # noqa: E402
from inference.queue import make_enqueue  # noqa: E402
from service import turn_queue as turn_service  # noqa: E402
from testkit.pg import fresh_database  # noqa: E402
from testkit.queue import ready_made  # noqa: E402

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
                    turn, _made = await turn_service.submit_turn(
                        s, gs, 1, ready_made("bench", ins), limits=LIMITS, enqueue=self.enqueue
                    )
                    fut = self.waiters[turn.id] = loop.create_future()
                committed = time.perf_counter()
            finished = await asyncio.wait_for(fut, 60)
            latencies.append(finished - committed)

    async def server_times(self) -> tuple[list[float], list[float]]:
        """Per turn, from the database's clock: submitted -> taken, and taken -> result written."""
        async with self.sessions() as s:
            rows = (await s.execute(text(
                "SELECT EXTRACT(EPOCH FROM started_at - created_at)::float, EXTRACT(EPOCH FROM finished_at - started_at)::float"
                " FROM turns WHERE status = 'done'"
            ))).all()
        return [r[0] for r in rows], [r[1] for r in rows]

    async def workers_registered(self) -> int:
        async with self.sessions() as s:
            return await s.scalar(text("SELECT count(*) FROM procrastinate_workers"))


def start_workers(url: str, n: int, order: str | None = None) -> list[subprocess.Popen]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), ANIMEGAMER_DATABASE_URL=url, ANIMEGAMER_QUEUE_POLL_INTERVAL="0.3")
    if order is not None:
        env["ANIMEGAMER_QUEUE_ORDER"] = order
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


async def wait_workers(bench: Bench, n: int) -> None:
    deadline = time.monotonic() + 60
    while await bench.workers_registered() < n:  # one turn worker each
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not start")
        await asyncio.sleep(0.1)


async def closed_loop(bench: Bench, url: str, n: int, args) -> dict:
    await bench.reset()
    procs = start_workers(url, n)
    try:
        await wait_workers(bench, n)
        async with Listener(url, [notify.TURN_FINISHED]) as listener:
            dispatcher = asyncio.create_task(bench.dispatch(listener))
            ids = [await bench.new_session(1000 + i) for i in range(args.sessions)]
            loaded: list[float] = []
            t0 = time.perf_counter()
            await asyncio.gather(*(bench.play(i, args.turns, loaded) for i in ids))
            elapsed = time.perf_counter() - t0
            waits, work = await bench.server_times()
            idle: list[float] = []
            await bench.play(await bench.new_session(9999), args.idle_turns, idle)
            dispatcher.cancel()
    finally:
        stop_workers(procs)
    return {"rate": len(loaded) / elapsed, "loaded": loaded, "idle": idle, "waits": waits, "work": work}


async def drain(bench: Bench, url: str, n: int, args) -> float:
    """Turns per second that `n` workers take off a full queue (no client in the loop)."""
    await bench.reset()
    ids = [await bench.new_session(1000 + i) for i in range(args.sessions)]
    for _ in range(args.turns):
        for i in ids:
            async with bench.sessions() as s, s.begin():
                gs = await s.get(GameSession, i)
                ins = build_instruction(FILMS["qiqi"], ["qiqi"], "walk", "town")
                await turn_service.submit_turn(s, gs, 1, ready_made("bench", ins), limits=LIMITS, enqueue=bench.enqueue)
    total = len(ids) * args.turns
    procs = start_workers(url, n)
    try:
        while True:
            async with bench.sessions() as s:
                row = (await s.execute(text(
                    "SELECT count(*) FILTER (WHERE status = 'done'), EXTRACT(EPOCH FROM max(finished_at) - min(started_at))::float FROM turns"
                ))).one()
            if row[0] >= total:
                return total / row[1]
            await asyncio.sleep(0.2)
    finally:
        stop_workers(procs)


async def idle_orders(bench: Bench, url: str, args) -> None:
    """--idle-only: the idle latency under each queue order (ANIMEGAMER_QUEUE_ORDER), one worker,
    the orders alternating --rounds times so that a busy machine weighs on both alike."""
    ms = lambda v: f"{v * 1000:.1f} ms"  # noqa: E731
    idle: dict[str, list[float]] = {"fifo": [], "fair": []}
    for _ in range(args.rounds):
        for order in idle:
            await bench.reset()
            procs = start_workers(url, 1, order)
            try:
                await wait_workers(bench, 1)
                async with Listener(url, [notify.TURN_FINISHED]) as listener:
                    dispatcher = asyncio.create_task(bench.dispatch(listener))
                    await bench.play(await bench.new_session(9999), args.idle_turns, idle[order])
                    dispatcher.cancel()
            finally:
                stop_workers(procs)
    fetch = await fetch_cost(bench, url, args.idle_turns * args.rounds)
    print(f"idle turn latency, one worker, {args.rounds} x {args.idle_turns} turns per order, {os.cpu_count()} CPU cores")
    for order, values in idle.items():
        print(f"{order:>5}: p50 {ms(statistics.median(values))}, p99 {ms(pct(values, 99))}; the fetch alone "
              f"(in this process, one waiting turn): p50 {ms(statistics.median(fetch[order]))}, p99 {ms(pct(fetch[order], 99))}")


async def fetch_cost(bench: Bench, url: str, n: int) -> dict[str, list[float]]:
    """The job manager's fetch_job alone, each order in turn, with one turn waiting each time."""
    from procrastinate.jobs import Status

    from inference.queue import make_app

    await bench.reset()
    session_id = await bench.new_session(9998)
    out: dict[str, list[float]] = {"fifo": [], "fair": []}
    apps = {order: make_app(url, order=order) for order in out}
    for app in apps.values():
        await app.open_async()
    try:
        workers = {order: await app.job_manager.register_worker() for order, app in apps.items()}
        film = FILMS["qiqi"]
        for _ in range(n):
            for order, app in apps.items():
                async with bench.sessions() as s, s.begin():
                    gs = await s.get(GameSession, session_id)
                    assert gs is not None
                    await turn_service.submit_turn(s, gs, 1, ready_made("bench", build_instruction(film, ["qiqi"], "walk", "town")),
                                                   limits=LIMITS, enqueue=bench.enqueue)
                t0 = time.perf_counter()
                job = await app.job_manager.fetch_job(["film.qiqi"], workers[order])
                out[order].append(time.perf_counter() - t0)
                assert job is not None
                await app.job_manager.finish_job(job, Status.SUCCEEDED, delete_job=False)
                async with bench.sessions() as s, s.begin():  # the turn leaves the backlog
                    await s.execute(text("UPDATE turns SET status = 'cancelled' WHERE status = 'queued'"))
    finally:
        for app in apps.values():
            await app.close_async()
    return out


async def run(args) -> None:
    ms = lambda v: f"{v * 1000:.0f} ms"  # noqa: E731
    with fresh_database("agbench") as url:
        engine = make_engine(url)
        await upgrade(engine)
        await engine.dispose()
        bench = Bench(url)
        if args.idle_only:
            await idle_orders(bench, url, args)
            await bench.engine.dispose()
            return
        print(f"turn queue bench: preview backend with rendering off, {args.sessions} sessions, {args.turns} turns each, "
              f"{os.cpu_count()} CPU cores shared by the client, the workers and Postgres")
        print(f"{'workers':>7} | {'turns/s':>7} {'latency p50':>11} {'p99':>7} | {'idle p50':>8} {'p99':>6} | "
              f"{'wait p50':>8} {'p99':>7} | {'worker p50':>10} {'p99':>6} | {'drain turns/s':>13}")
        for n in args.workers:
            r = await closed_loop(bench, url, n, args)
            rate = await drain(bench, url, n, args)
            print(
                f"{n:>7} | {r['rate']:>7.1f} {ms(statistics.median(r['loaded'])):>11} {ms(pct(r['loaded'], 99)):>7} | "
                f"{ms(statistics.median(r['idle'])):>8} {ms(pct(r['idle'], 99)):>6} | "
                f"{ms(statistics.median(r['waits'])):>8} {ms(pct(r['waits'], 99)):>7} | "
                f"{ms(statistics.median(r['work'])):>10} {ms(pct(r['work'], 99)):>6} | {rate:>13.1f}"
            )
        await bench.engine.dispose()
    print(
        "turns/s, latency: closed loop, each session submits its next turn when the previous one's NOTIFY arrives;\n"
        "  latency = submission committed -> finished NOTIFY received (includes waiting behind other sessions)\n"
        "idle: one session, one turn at a time: the latency the queue adds to a turn\n"
        "wait: submitted -> taken by a worker; worker: taken -> result written (database clock, closed loop)\n"
        "drain: all turns queued first, then the workers start; turns finished per second"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument("--turns", type=int, default=8, help="turns per session in the loaded run")
    p.add_argument("--idle-turns", type=int, default=30)
    p.add_argument("--idle-only", action="store_true", help="only the idle latency, first come first served vs fair")
    p.add_argument("--rounds", type=int, default=3, help="with --idle-only: alternations of the two orders")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
