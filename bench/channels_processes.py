"""The processes of bench/channels.py other than Discord's: the bot alone in its own process (its
acknowledgements, garbage collections, new HTTP connections, database round trips per command and
the vote-round job's skipped runs, sent back to the bench when it stops) and one preview worker."""

from __future__ import annotations

from _paths import ROOT  # noqa: F401  (first: the project root on sys.path)

import asyncio
import contextlib
import contextvars
import gc
import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import discord

from db.runtime import open_database
from service.runtime import Store
from settings import Settings

INVOKER = "CommandTree-invoker"  # the task discord.py's command tree runs a slash command in
COMMAND: contextvars.ContextVar[str] = contextvars.ContextVar("bench_command", default="?")


def bench_settings(url: str, tmp: str) -> Settings:
    values = {"database_url": url, "data_dir": Path(tmp), "cooldown_seconds": 0, "backlog_cap": 100,
              "queue_poll_interval": 0.2, "metrics_port": 0}
    return Settings(_env_file=None, **values)  # pyright: ignore[reportCallIssue]


class _Skips(logging.Handler):
    """Counts APScheduler's "skipped: maximum number of running instances reached", per job."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "maximum number of running instances reached" in msg:
            name = msg.split('"')[1].split(" (trigger")[0] if '"' in msg else "?"
            self.count[name] += 1


class _DbCounter:
    """Database round trips in the bot's process, by the kind of task that made them."""

    def __init__(self, engine) -> None:
        from sqlalchemy import event

        self.engine = engine
        self.by: Counter[tuple[str, str]] = Counter()  # (command|background, statement|checkout|begin|commit)
        self.out = 0
        self.peak_out = 0
        self.log: list[str] = []
        sync = engine.sync_engine
        event.listen(sync, "before_cursor_execute", self._statement)
        event.listen(sync, "begin", lambda *a: self._count("begin"))
        event.listen(sync, "commit", lambda *a: self._count("commit"))
        event.listen(sync, "rollback", lambda *a: self._count("rollback"))
        event.listen(sync.pool, "checkout", self._checkout)
        event.listen(sync.pool, "checkin", self._checkin)

    @staticmethod
    def _who() -> str:
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return "background"
        # The handler's task, and the unnamed ones it awaits (SQLAlchemy shields a session's commit
        # and close in a task of their own); not the named tasks the bot spawns from it.
        name = task.get_name() if task is not None else ""
        if COMMAND.get() != "?" and (name == INVOKER or name.startswith("Task-")):
            return f"/{COMMAND.get()}"
        return "background"

    def _statement(self, conn, cursor, statement, *a) -> None:
        who = self._who()
        self.by[(who, "statement")] += 1
        if os.environ.get("BENCH_SQL_LOG") and who != "background":
            self.log.append(f"{who}: {' '.join(statement.split())[:160]}")

    def _count(self, what: str) -> None:
        self.by[(self._who(), what)] += 1

    def _checkout(self, *a) -> None:
        self._count("checkout")  # with pool_pre_ping, one ping round trip each
        self.out += 1
        self.peak_out = max(self.peak_out, self.out)

    def _checkin(self, *a) -> None:
        self.out -= 1

    def snapshot(self) -> dict[str, Any]:
        pool = self.engine.sync_engine.pool
        return {
            "by": {f"{who}:{what}": n for (who, what), n in self.by.items()},
            "peak_checked_out": self.peak_out,
            "pool_size": pool.size(),
            "max_overflow": getattr(pool, "_max_overflow", None),
            "pool_timeout": getattr(pool, "_timeout", None),
        }

    def reset(self) -> None:
        self.by.clear()
        self.peak_out = self.out


def bot_main(conn, url: str, tmp: str, api_base: str, gateway_url: str, token: str) -> None:
    asyncio.run(_bot_async(conn, url, tmp, api_base, gateway_url, token))


async def _bot_async(conn, url: str, tmp: str, api_base: str, gateway_url: str, token: str) -> None:
    # long: one process's instrumentation; its hooks close over the lists the "stats" reply sends
    import discord.gateway
    import discord.http
    import yarl
    from aiohttp import TCPConnector

    from bot.client import AnimeGamerBot

    logging.basicConfig(level=logging.WARNING, format="bot %(levelname)s %(name)s: %(message)s")
    skips = _Skips()
    logging.getLogger("apscheduler").addHandler(skips)
    discord.http.Route.BASE = api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)
    settings = bench_settings(url, tmp)
    loop = asyncio.get_running_loop()
    timeline: list[tuple[str, float]] = []  # (event, perf_counter), with BENCH_TIMELINE set
    traced = bool(os.environ.get("BENCH_TIMELINE"))

    def mark(event: str, at: float | None = None) -> None:
        if traced:
            timeline.append((event, time.perf_counter() if at is None else at))

    # New HTTP connections to Discord (an interaction's callback waits for one when none is idle).
    connections = Counter()
    create = TCPConnector._create_connection

    async def creating(self, *a, **kw):
        connections["opened"] += 1
        mark("connecting")
        try:
            return await create(self, *a, **kw)
        finally:
            mark("connected")

    TCPConnector._create_connection = creating  # type: ignore[method-assign]

    async with open_database(settings) as db:
        counter = _DbCounter(db.engine)
        bot = AnimeGamerBot(settings, Store(db), guild_ready_timeout=0.05)
        acks: list[float] = []
        observe = bot.metrics.acknowledged

        def acknowledged(kind: str, seconds: float) -> None:  # the histogram's samples, kept raw too
            acks.append(seconds)
            mark("ack")
            observe(kind, seconds)

        bot.metrics.acknowledged = acknowledged  # type: ignore[method-assign]
        by_command: dict[str, list[float]] = {}  # the same samples, by command (the meter's private hook)
        ack = bot.interaction_meter._ack

        def acked(t, at: float) -> None:
            name = getattr(getattr(t.interaction, "command", None), "qualified_name", "?")
            by_command.setdefault(name, []).append(at - t.received)
            ack(t, at)

        bot.interaction_meter._ack = acked  # type: ignore[method-assign]
        received = bot.interaction_meter.received

        def receiving(interaction) -> None:
            mark("received")
            received(interaction)

        bot.interaction_meter.received = receiving  # type: ignore[method-assign]
        check = bot.tree.interaction_check

        async def tagged(interaction: discord.Interaction[AnimeGamerBot]) -> bool:  # which command a handler's queries are for
            mark("handler")
            COMMAND.set(interaction.command.qualified_name if interaction.command else "?")
            return await check(interaction)

        bot.tree.interaction_check = tagged  # type: ignore[method-assign]
        gc_pauses: list[tuple[int, float]] = []  # (generation, seconds) of every collection
        gc_started = [0.0]

        def gc_watch(phase: str, info: dict) -> None:
            if phase == "start":
                gc_started[0] = time.perf_counter()
            else:
                gc_pauses.append((info["generation"], time.perf_counter() - gc_started[0]))
                mark(f"gc{info['generation']}", gc_started[0])

        gc.callbacks.append(gc_watch)

        def buckets() -> dict[str, float]:
            found = {}
            for m in bot.metrics.registry.collect():
                if m.name == "animegamer_bot_ack_seconds":
                    for sample in m.samples:
                        if sample.name.endswith("_bucket") and sample.labels.get("kind") == "command":
                            found[sample.labels["le"]] = sample.value
            return found

        task = asyncio.create_task(bot.start(token))
        while not bot.is_ready():
            if task.done():
                task.result()
                raise RuntimeError("the bot stopped before READY")
            await asyncio.sleep(0.01)
        await bot.tree.sync()
        baseline = buckets()
        conn.send(("ready", os.getpid()))
        while True:
            msg = await loop.run_in_executor(None, conn.recv)
            if msg == "reset":
                baseline = buckets()
                for kept in (acks, timeline, gc_pauses):
                    kept.clear()
                by_command.clear()
                connections.clear()
                counter.reset()
                skips.count.clear()
                conn.send("ok")
            elif msg == "stats":
                now = buckets()
                if timeline:
                    t0 = timeline[0][1]
                    Path(os.environ["BENCH_TIMELINE"]).write_text("".join(f"{e} {(t - t0) * 1000:.2f}\n" for e, t in timeline))
                if counter.log:
                    Path(os.environ["BENCH_SQL_LOG"]).write_text("\n".join(counter.log) + "\n")
                conn.send({"by_command": by_command, "gc": list(gc_pauses), "connections": dict(connections), "acks": list(acks),
                           "buckets": {k: v - baseline.get(k, 0.0) for k, v in now.items()},
                           "db": counter.snapshot(), "skips": dict(skips.count), "edit_queue": bot.edits.pending_count(),
                           "gc_threshold": gc.get_threshold(), "gc_frozen": gc.get_freeze_count()})
            elif msg == "stop":
                await bot.close()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(task, 10)
                conn.send("stopped")
                return


# --- the preview worker's process


def worker_main(url: str, tmp: str, delay: float, stop) -> None:
    asyncio.run(_worker_async(url, tmp, delay, stop))


async def _worker_async(url: str, tmp: str, delay: float, stop) -> None:
    from inference.worker import Worker

    logging.basicConfig(level=logging.WARNING, format="worker %(levelname)s %(name)s: %(message)s")
    worker = Worker(bench_settings(url, tmp), backend="preview", install_signal_handlers=False, migrate=False,
                    backend_options={"width": 96, "height": 64, "delay": delay})
    task = asyncio.create_task(worker.run())
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, stop.wait)
    worker.stop()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(task, 30)


# --- this process: Discord and its members
