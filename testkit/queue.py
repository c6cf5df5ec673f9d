"""Helpers for the queue tests: sessions with players, submitted turns, workers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select, text

from db import sessions as session_service
from db.guilds import Limits
from db.models import GameSession, Player, Turn
from game.catalogue import FILMS
from game.instruction import Instruction, build_instruction
from inference.queue import make_enqueue
from service import turn_queue as turn_service
from service.turn_queue import Authored, Compose
from testkit.waits import wait_for as wait_until  # noqa: F401  (the queue tests' name for the shared wait)

ROOT = Path(__file__).resolve().parents[1]
LIMITS = Limits(max_instruction_len=300, cooldown_seconds=0, backlog_cap=50)
MOTIONS = ("walk", "run", "fly on broomstick", "sit on railing", "talk", "eat", "sleep", "wave")


async def new_session(sessions, channel_id: int, film: str = "qiqi", user_id: int = 1, character: str = "qiqi"):
    async with sessions() as s, s.begin():
        gs = await session_service.start_session(s, 10, channel_id, FILMS[film], created_by=user_id)
        await session_service.join(s, gs, FILMS[film], user_id, f"user{user_id}", character)
    return gs


def ready_made(author_name: str, instruction: Instruction) -> Compose:
    """A direct turn's author and instruction given in advance, for service.turn_queue.submit_turn
    (the app's /act makes them from the player under the game's lock: service.players.act)."""

    async def compose(_me: Player) -> Authored:
        return Authored(author_name, instruction)

    return compose


async def submit(sessions, gs, motion: str = "walk", *, user_id: int = 1, character: str = "qiqi",
                 background: str = "town", limits: Limits = LIMITS, enqueue=None) -> Turn:
    ins = build_instruction(FILMS[gs.film_id], [character], motion, background, adverb="quickly", time_of_day="day")
    async with sessions() as s, s.begin():
        gs = await s.get(GameSession, gs.id)
        turn, _made = await turn_service.submit_turn(
            s, gs, user_id, ready_made(f"user{user_id}", ins), limits=limits, enqueue=enqueue or make_enqueue()
        )
        return turn


async def turn_rows(sessions, session_id: int | None = None) -> list[Turn]:
    async with sessions() as s:
        q = select(Turn).order_by(Turn.session_id, Turn.seq)
        if session_id is not None:
            q = q.where(Turn.session_id == session_id)
        return list((await s.scalars(q)).all())


async def wait_started(worker, task: asyncio.Task, timeout: float = 30.0) -> None:
    """Wait until a worker whose run() is `task` is ready; a start failure is raised here."""
    ready = asyncio.create_task(worker.ready.wait())
    await asyncio.wait([ready, task], return_when=asyncio.FIRST_COMPLETED, timeout=timeout)
    ready.cancel()
    if task.done():
        task.result()  # raises the start error
    assert worker.ready.is_set(), f"worker did not start within {timeout} s"


async def all_finished(sessions, n: int) -> bool:
    rows = await turn_rows(sessions)
    return len(rows) >= n and all(t.status in ("done", "failed", "cancelled") for t in rows)


async def job_rows(sessions):
    async with sessions() as s:
        return (await s.execute(text("SELECT id, status, lock, worker_id, attempts, args FROM procrastinate_jobs WHERE task_name = 'generate_turn' ORDER BY id"))).all()


def worker_env(database_url: str, **settings) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["ANIMEGAMER_DATABASE_URL"] = database_url
    env.setdefault("ANIMEGAMER_QUEUE_POLL_INTERVAL", "0.2")
    for k, v in settings.items():
        env[f"ANIMEGAMER_{k.upper()}"] = str(v)
    return env


def start_worker_process(database_url: str, *args: str, log_path: Path | None = None, **settings) -> subprocess.Popen:
    """`animegamer worker` as a subprocess (preview backend, no metrics unless asked)."""
    cmd = [sys.executable, "-m", "animegamer.cli", "worker", "--backend", "preview", "--no-migrate", "--metrics-port", "0", *args]
    env = worker_env(database_url, **settings)
    if log_path is None:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    # The child holds its own copy of the log's descriptor; ours is closed once it has started.
    with open(log_path, "wb") as out:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop_processes(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(20)
        if p.poll() is None:
            p.kill()
            p.wait()


async def registered_workers(sessions) -> int:
    async with sessions() as s:
        return await s.scalar(text("SELECT count(*) FROM procrastinate_workers"))
