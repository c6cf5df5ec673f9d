"""Waits of each server's turns in a mixed load, first come first served vs the fair order.

One `animegamer worker` process (preview backend, rendering off, `--preview-delay` standing in
for the model: every turn costs the same) serves three servers at once for --seconds:

- flood: --flood-channels channels, each keeping its backlog full (--backlog turns waiting:
  a new turn as soon as one finishes), as a busy community with many games does;
- steady: --steady-channels channels, each submitting a turn every --steady-every seconds;
- lone: one player, one turn at a time: the next one --think seconds after the last finished.

Each turn's wait is taken from the database's clock: submitted (`created_at`) -> taken by the
worker (`started_at`); a turn still waiting when the load stops counts with its wait so far. The run is done once with ANIMEGAMER_QUEUE_ORDER=fifo (procrastinate's
order, as before #39) and once with the fair order, on a fresh database each.

Run: PYTHONPATH=. python bench/fairness.py [--seconds 60] [--turn 0.2]
Uses a throw-away database on ANIMEGAMER_TEST_PG (default postgresql://postgres@127.0.0.1:5432).
Figures: docs/queue.md, "Fair order".
"""

from __future__ import annotations

from _paths import ROOT  # first: keeps bench/queue.py from shadowing the stdlib

import argparse
import asyncio
import os
import signal
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
from game.turn_errors import BacklogFull  # noqa: E402
from inference.queue import make_enqueue  # noqa: E402
from service import turn_queue as turn_service  # noqa: E402
from testkit.pg import fresh_database  # noqa: E402
from testkit.queue import ready_made  # noqa: E402

FLOOD, STEADY, LONE = 1, 2, 3
NAMES = {FLOOD: "flood", STEADY: "steady", LONE: "lone"}


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


class Load:
    def __init__(self, url: str, args) -> None:
        self.engine = make_engine(url, pool_size=10, max_overflow=10)
        self.sessions = make_sessionmaker(self.engine)
        self.enqueue = make_enqueue()
        self.args = args
        self.limits = Limits(max_instruction_len=300, cooldown_seconds=0, backlog_cap=args.backlog)
        self.finished: dict[int, asyncio.Event] = {}  # session id -> set at each finished turn
        self.stop_at = 0.0
        self.refused = 0  # the steady server's turns refused for a full backlog

    async def game(self, guild: int, channel: int) -> int:
        film = FILMS["qiqi"]
        async with self.sessions() as s, s.begin():
            gs = await session_service.start_session(s, guild, channel, film, created_by=1)
            await session_service.join(s, gs, film, 1, "bench", "qiqi")
        self.finished[gs.id] = asyncio.Event()
        return gs.id

    async def submit(self, session_id: int) -> None:
        ins = build_instruction(FILMS["qiqi"], ["qiqi"], "walk", "town")
        async with self.sessions() as s, s.begin():
            gs = await s.get(GameSession, session_id)
            assert gs is not None
            await turn_service.submit_turn(s, gs, 1, ready_made("bench", ins), limits=self.limits, enqueue=self.enqueue)

    async def listen(self, listener: Listener) -> None:
        async for n in listener:
            ev = self.finished.get(int(n.payload.get("session_id") or 0))
            if ev is not None:
                ev.set()

    def running(self) -> bool:
        return time.monotonic() < self.stop_at

    async def finished_one(self, session_id: int) -> None:
        ev = self.finished[session_id]
        await ev.wait()
        ev.clear()

    async def flood(self, session_id: int) -> None:
        for _ in range(self.args.backlog):
            await self.submit(session_id)
        while self.running():
            await self.finished_one(session_id)
            if self.running():
                await self.submit(session_id)

    async def steady(self, session_id: int, offset: float) -> None:
        await asyncio.sleep(offset)
        while self.running():
            try:
                await self.submit(session_id)
            except BacklogFull:  # its game already has a full backlog: the player is refused
                self.refused += 1
            await asyncio.sleep(self.args.steady_every)

    async def lone(self, session_id: int) -> None:
        await asyncio.sleep(self.args.think)  # arrives once the flood is queued
        while self.running():
            await self.submit(session_id)
            await self.finished_one(session_id)
            await asyncio.sleep(self.args.think)

    async def waits(self) -> dict[int, list[float]]:
        async with self.sessions() as s:
            # A turn still waiting at the end counts with its wait so far (a lower bound).
            rows = (await s.execute(text(
                "SELECT g.guild_id, EXTRACT(EPOCH FROM coalesce(t.started_at, clock_timestamp()) - t.created_at)::float"
                " FROM turns t JOIN game_sessions g ON g.id = t.session_id"))).all()
        out: dict[int, list[float]] = {FLOOD: [], STEADY: [], LONE: []}
        for guild, wait in rows:
            out[guild].append(wait)
        return out


def start_worker(url: str, order: str, turn: float) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), ANIMEGAMER_DATABASE_URL=url, ANIMEGAMER_QUEUE_ORDER=order,
               ANIMEGAMER_QUEUE_POLL_INTERVAL="0.3")
    cmd = [sys.executable, "-m", "animegamer.cli", "worker", "--backend", "preview", "--no-render", "--no-migrate",
           "--metrics-port", "0", "--film", "qiqi", "--preview-delay", str(turn)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def one_run(order: str, args) -> dict:
    with fresh_database("agfair") as url:
        engine = make_engine(url)
        await upgrade(engine)
        await engine.dispose()
        load = Load(url, args)
        worker = start_worker(url, order, args.turn)
        try:
            async with load.sessions() as s:
                while not await s.scalar(text("SELECT count(*) FROM procrastinate_workers")):
                    await asyncio.sleep(0.1)
            flood = [await load.game(FLOOD, 1000 + c) for c in range(args.flood_channels)]
            steady = [await load.game(STEADY, 2000 + c) for c in range(args.steady_channels)]
            lone = await load.game(LONE, 3000)
            async with Listener(url, [notify.TURN_FINISHED]) as listener:
                dispatcher = asyncio.create_task(load.listen(listener))
                load.stop_at = time.monotonic() + args.seconds
                players = [*(load.flood(i) for i in flood),
                           *(load.steady(i, k * args.steady_every / len(steady)) for k, i in enumerate(steady)),
                           load.lone(lone)]
                tasks = [asyncio.create_task(p) for p in players]
                await asyncio.sleep(args.seconds)
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                dispatcher.cancel()
            return {**await load.waits(), "refused": load.refused}
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
            await load.engine.dispose()


async def run(args) -> None:
    results = {order: await one_run(order, args) for order in ("fifo", "fair")}
    print(f"fairness bench: 1 preview worker, {args.turn:g} s a turn, {args.seconds:g} s of load; flood: "
          f"{args.flood_channels} channels at a backlog of {args.backlog}; steady: {args.steady_channels} channels, "
          f"a turn each every {args.steady_every:g} s; lone: one turn at a time, {args.think:g} s apart; "
          f"{os.cpu_count()} CPU cores")
    print(f"{'server':<7} | {'first come first served: turns':>30} {'p50':>7} {'p99':>7} {'max':>7} | "
          f"{'fair: turns':>11} {'p50':>7} {'p99':>7} {'max':>7}")
    for guild in (FLOOD, STEADY, LONE):
        cells = []
        for order in ("fifo", "fair"):
            w = results[order][guild]
            cells.append(f"{len(w):>{30 if order == 'fifo' else 11}} " + " ".join(
                f"{v:>6.1f}s" for v in ((pct(w, 50), pct(w, 99), max(w)) if w else (0, 0, 0))))
        print(f"{NAMES[guild]:<7} | {cells[0]} | {cells[1]}")
    print("wait: a turn's submission -> a worker taking it (database clock); turns: submitted during the run\n"
          "  (a turn still waiting at the end counts with its wait so far); the steady server's turns refused for a "
          f"full backlog: {results['fifo']['refused']} first come first served, {results['fair']['refused']} fair")


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--turn", type=float, default=0.2, help="seconds a turn takes on the worker")
    p.add_argument("--flood-channels", type=int, default=10)
    p.add_argument("--backlog", type=int, default=5)
    p.add_argument("--steady-channels", type=int, default=2)
    p.add_argument("--steady-every", type=float, default=3.0)
    p.add_argument("--think", type=float, default=2.0)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
