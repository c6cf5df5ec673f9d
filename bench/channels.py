"""500 busy channels on one bot process: every channel starts a game, joins it and acts at the
same moment; how fast is each interaction acknowledged?

Three processes, as in a deployment: this one plays Discord (the fake Discord of the tests) and
its members; the bot (discord.py, the real AnimeGamerBot) runs alone in a child process, so that
its event loop carries nothing but the bot; one preview worker runs in another child (unless
--no-worker). All share one real Postgres (a throw-away database on ANIMEGAMER_TEST_PG, default
postgresql://postgres@127.0.0.1:5432).

Each of --channels channels (spread over --guilds guilds) has its own member, who runs /game start,
then /game join as soon as the start is answered, then /act as soon as the join is answered, all
channels at once (--mode pipeline, the default). --mode phases fires every channel's /game start
at once, waits for every answer, then every /game join, then every /act.

Printed: interactions acknowledged / sent, answered, acts queued; acknowledgement p50/p95/p99/max
as the bot measured it (bot.parts.metrics' animegamer_bot_ack_seconds: from its dispatch of the
interaction to the callback's body leaving; the raw samples, and the histogram's share within
100 ms) and as the fake Discord saw it (from its INTERACTION_CREATE to the callback request being
handled), both per command; the time from the first command to the last answer and the CPU
time each process used meanwhile; the bot's garbage collections and new HTTP connections; the
vote-round job's skipped runs (APScheduler's "maximum number of running instances reached");
database round trips per command (statements, plus the pool's checkouts, each of which is a
pre-ping, plus BEGIN and COMMIT/ROLLBACK) in the command handlers and elsewhere; the engine's
pool size and the most connections checked out at once.

Run: PYTHONPATH=. python bench/channels.py [--channels 500] [--guilds 1] [--mode pipeline|phases]
     [--steps 1|2|3] [--no-worker] [--py-spy profile.svg|stacks.txt]
BENCH_TIMELINE=file writes the bot's receipts, handler starts, new connections, acknowledgements
and garbage collections in order (ms); BENCH_SQL_LOG=file the handlers' statements.
Figures and what they showed: docs/performance.md, "500 busy channels on one bot process".
"""

from __future__ import annotations

from _paths import ROOT  # noqa: F401  (first: the project root on sys.path)

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import discord
from channels_processes import bench_settings, bot_main, worker_main
from sqlalchemy import func, select

from db.engine import make_engine
from db.migrate import upgrade
from db.models import Turn
from db.runtime import open_database
from testkit.fake_discord import FakeDiscord
from testkit.pg import fresh_database

STEPS = (
    ("game start", {}, "has started"),
    ("game join", {"character": "qiqi"}, "You play"),
    ("act", {"motion": "walk", "background": "town"}, "is queued"),
)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "max": float("nan"), "n": 0}
    s = sorted(values)

    def p(q: float) -> float:
        return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]  # nearest rank

    return {"p50": p(0.50), "p95": p(0.95), "p99": p(0.99), "max": s[-1], "n": len(s)}


# --- the bot's process


class Driver:
    def __init__(self, server: FakeDiscord, places: list[tuple[Any, Any, Any]], mode: str, steps: int = len(STEPS)) -> None:
        self.server = server
        self.steps = steps
        self.places = places  # (guild, channel, member) per channel
        self.mode = mode
        self.handles: list[tuple[int, int, Any]] = []  # (place index, step, handle)
        self.answered: dict[int, tuple[float, str]] = {}  # handle id -> (monotonic, content)
        self.pending: list[tuple[int, int, Any]] = []
        self.first_sent: float | None = None
        self.push_errors: list[str] = []

    async def _push(self, i: int, step: int) -> None:
        guild, channel, member = self.places[i]
        name, options, _ = STEPS[step]
        if self.first_sent is None:
            self.first_sent = time.monotonic()
        try:
            h = await self.server.slash(guild, channel, member, name, options)
        except Exception as e:  # noqa: BLE001
            self.push_errors.append(f"{name} in {channel.name}: {e}")
            return
        entry = (i, step, h)
        self.handles.append(entry)
        self.pending.append(entry)

    async def _watch(self, expected: int, timeout: float, follow: bool) -> None:
        deadline = time.monotonic() + timeout
        pushes: list[asyncio.Task] = []
        while len(self.answered) + len(self.push_errors) < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            still = []
            for entry in self.pending:
                i, step, h = entry
                if h.followup_ids:
                    msg = self.server.messages[h.followup_ids[0]]
                    self.answered[h.id] = (time.monotonic(), msg.content or "")
                    if follow and step + 1 < self.steps:
                        pushes.append(asyncio.create_task(self._push(i, step + 1)))
                else:
                    still.append(entry)
            self.pending = still
        await asyncio.gather(*pushes)

    async def run(self, timeout: float = 600.0) -> None:
        n = len(self.places)
        if self.mode == "pipeline":
            await asyncio.gather(*(self._push(i, 0) for i in range(n)))
            await self._watch(n * self.steps, timeout, follow=True)
        else:
            for step in range(self.steps):
                await asyncio.gather(*(self._push(i, step) for i in range(n)))
                await self._watch(n * (step + 1), timeout, follow=False)


async def _quiet(idle_share: float = 0.85, window: float = 0.5, limit: float = 30.0) -> tuple[float, float]:
    """Wait until the machine's CPUs were idle for `idle_share` of a `window` (the processes just
    started, the previous run's Postgres work, done), at most `limit` s. Returns (seconds waited,
    the last window's idle share)."""
    import psutil

    t0 = time.monotonic()
    while True:
        before = psutil.cpu_times()
        await asyncio.sleep(window)
        after = psutil.cpu_times()
        busy = sum(after) - sum(before)
        idle = ((after.idle - before.idle) / busy) if busy > 0 else 1.0
        if idle >= idle_share or time.monotonic() - t0 >= limit:
            return time.monotonic() - t0, idle


def _cpu_seconds(bot_pid: int, worker_pid: int | None) -> dict[str, float]:
    """CPU time (user + system) so far of the bot, this process (Discord and its members), the
    worker and every Postgres process."""
    import psutil

    def of(p: psutil.Process) -> float:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            return t.user + t.system
        return 0.0

    out = {"bot": of(psutil.Process(bot_pid)), "fake Discord": of(psutil.Process())}
    if worker_pid:
        out["worker"] = of(psutil.Process(worker_pid))
    out["postgres"] = sum(of(p) for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("postgres"))
    return out


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("| " + " | ".join(v.ljust(widths[c]) for c, v in enumerate(r)) + " |")
        if k == 0:
            out.append("| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(out)


def _ms(x: float) -> str:
    return f"{x * 1000:.0f} ms"


def _places(server, args):
    """The guilds, their channels and a player per channel: ((guild, channel, player) per channel,
    (guild, admin) per guild)."""
    places = []
    per_guild = -(-args.channels // args.guilds)
    for g in range(args.guilds):
        guild = server.create_guild(f"bench-{g}")
        admins = guild.create_role("admins", permissions=discord.Permissions(manage_guild=True))
        admin = guild.create_member(f"admin-{g}", roles=[admins])
        places.append((guild, None, admin))
        for c in range(min(per_guild, args.channels - g * per_guild)):
            channel = guild.create_text_channel(f"games-{g}-{c}")
            places.append((guild, channel, guild.create_member(f"player-{g}-{c}")))
    admins_ = [(g, m) for g, ch, m in places if ch is None]
    return [p for p in places if p[1] is not None], admins_


def _print_report(args, driver, stats, queued, waited, idle, load_before, span, cpu_used) -> None:
    """What the run measured: acknowledgements, answers, latencies, GC, database round trips."""
    sent = len(driver.handles)
    responded = [h for _, _, h in driver.handles if h.responded]
    fake_delays = [h.response.delay for h in responded]
    by_step: dict[int, list[float]] = {}
    for _, step, h in driver.handles:
        if h.responded:
            by_step.setdefault(step, []).append(h.response.delay)
    wrong = Counter()
    for _i, step, h in driver.handles:
        got = driver.answered.get(h.id)
        if got is None or STEPS[step][2] not in got[1]:
            wrong[(STEPS[step][0], (got[1] if got else "no answer")[:80])] += 1

    bot_acks = stats["acks"]
    bot_p = percentiles(bot_acks)
    fake_p = percentiles(fake_delays)
    buckets = stats["buckets"]
    total = buckets.get("+Inf", 0.0) or float("nan")
    within_100 = buckets.get("0.1", 0.0) / total
    db_by = stats["db"]["by"]

    def trips(who: str) -> int:
        return sum(db_by.get(f"{who}:{w}", 0) for w in ("statement", "checkout", "begin", "commit", "rollback"))

    print(f"{args.channels} channels in {args.guilds} guild(s), mode {args.mode}, "
          f"preview worker: {f'yes (delay {args.delay:.1f} s)' if args.worker else 'no'}; "
          f"{os.cpu_count()} CPUs, load average before {load_before[0]:.2f}; waited {waited:.1f} s for the CPUs "
          f"to be {idle:.0%} idle")
    print(f"interactions: {len(responded)} acknowledged / {sent} sent ({sent - len(responded)} not), "
          f"{len(driver.answered)} answered; acts queued: {queued}")
    if driver.push_errors:
        print(f"push errors: {len(driver.push_errors)}, e.g. {driver.push_errors[0]}")
    if wrong:
        print("unexpected answers:", dict(wrong.most_common(5)))
    rows: list[tuple[str, ...]] = [("acknowledgement", "n", "p50", "p95", "p99", "max")]
    rows.append(("bot histogram (dispatch -> callback sent)", str(bot_p["n"]),
                 *(_ms(bot_p[k]) for k in ("p50", "p95", "p99", "max"))))
    rows.append(("fake Discord (INTERACTION_CREATE -> callback)", str(fake_p["n"]),
                 *(_ms(fake_p[k]) for k in ("p50", "p95", "p99", "max"))))
    for step, (name, _, _) in enumerate(STEPS):
        for who, delays in (("bot", stats["by_command"].get(name, [])), ("fake", by_step.get(step, []))):
            if delays:
                p = percentiles(delays)
                rows.append((f"  {who}, /{name}", str(p["n"]), *(_ms(p[k]) for k in ("p50", "p95", "p99", "max"))))
    print(_table(rows))
    print(f"bot histogram: {within_100:.1%} of acknowledgements within 100 ms "
          f"(buckets: {', '.join(f'<={k}: {int(v)}' for k, v in buckets.items())})")
    print(f"first command to last answer: {span:.2f} s; CPU seconds meanwhile: "
          + ", ".join(f"{k} {v:.1f}" for k, v in cpu_used.items()))
    pauses = stats["gc"]
    full = [d for g, d in pauses if g == 2]
    print(f"the bot's garbage collections: {len(pauses)}, {sum(d for _, d in pauses) * 1000:.0f} ms in all, "
          f"longest {max((d for _, d in pauses), default=0) * 1000:.0f} ms; {len(full)} full, longest "
          f"{max(full, default=0) * 1000:.0f} ms (thresholds {stats['gc_threshold']}, {stats['gc_frozen']} objects frozen)")
    print(f"the bot's new HTTP connections to Discord: {stats['connections'].get('opened', 0)}")
    print(f"vote-round job skipped runs: {stats['skips'].get('Vote.tick', 0)} "
          f"(all jobs: {stats['skips'] or 'none'})")
    kinds = ("statement", "checkout", "begin", "commit", "rollback")
    print("database round trips per command (statements, checkouts (each a pre-ping), BEGIN, COMMIT or ROLLBACK):")
    for step, (name, _, _) in enumerate(STEPS):
        count = sum(1 for _, st, _ in driver.handles if st == step) or 1
        who = f"/{name}"
        parts = ", ".join(f"{w} {db_by.get(f'{who}:{w}', 0) / count:.1f}" for w in kinds)
        print(f"  {who:<12} {trips(who) / count:5.1f} in the handler ({parts})")
    print(f"  elsewhere    {trips('background') / (sent or 1):5.1f} per command (status messages, notifier, jobs)")
    print(f"pool: pool_size {stats['db']['pool_size']}, max_overflow {stats['db']['max_overflow']}, "
          f"timeout {stats['db']['pool_timeout']} s; most checked out at once: {stats['db']['peak_checked_out']}; "
          f"edits waiting at the end: {stats['edit_queue']}")
    if args.py_spy:
        print(f"profile of the bot process: {args.py_spy}")


async def run(args) -> None:
    ctx = mp.get_context("spawn")
    with fresh_database() as url, tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(url)
        await upgrade(engine)
        await engine.dispose()
        settings = bench_settings(url, tmp)
        async with FakeDiscord() as server, open_database(settings) as db:
            places, admins_ = _places(server, args)

            parent, child = ctx.Pipe()
            bot_proc = ctx.Process(target=bot_main, args=(child, url, tmp, server.api_base, server.gateway_url, server.token),
                                   name="bench-bot")
            bot_proc.start()
            loop = asyncio.get_running_loop()

            async def ask(msg):
                parent.send(msg)
                return await loop.run_in_executor(None, parent.recv)

            ready = await loop.run_in_executor(None, parent.recv)
            bot_pid = ready[1]
            for guild, admin in admins_:  # the film every channel of the guild plays
                channel = next(ch for g, ch, _ in places if g is guild)
                h = await server.slash(guild, channel, admin, "admin film", {"film": "qiqi"})
                await h.wait_followup(timeout=30)

            stop_worker = ctx.Event()
            worker_proc = None
            if args.worker:
                worker_proc = ctx.Process(target=worker_main, args=(url, tmp, args.delay, stop_worker), name="bench-worker")
                worker_proc.start()
                await asyncio.sleep(3.0)  # the worker connects and listens
            await asyncio.sleep(2.0)  # the bot's start-up jobs (privacy, withdrawn films) are done
            await ask("reset")
            spy = None
            if args.py_spy:
                spy_bin = shutil.which("py-spy") or str(Path(ROOT) / ".venv/bin/py-spy")
                fmt = (["--format", "raw"] if args.py_spy.endswith(".txt")  # collapsed stacks
                       else ["--format", "speedscope"] if args.py_spy.endswith(".json")  # samples in time order
                       else [])
                spy = subprocess.Popen([spy_bin, "record", "-o", args.py_spy, "--pid", str(bot_pid), "--rate", "1000",
                                        "--nonblocking", *fmt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                await asyncio.sleep(1.0)
            waited, idle = await _quiet()
            load_before = os.getloadavg()
            cpu_before = _cpu_seconds(bot_pid, worker_proc.pid if worker_proc else None)

            driver = Driver(server, places, args.mode, args.steps)
            await driver.run(timeout=args.timeout)
            last_answer = max((t for t, _ in driver.answered.values()), default=float("nan"))
            span = last_answer - (driver.first_sent or last_answer)
            cpu_used = {k: v - cpu_before.get(k, 0.0) for k, v in _cpu_seconds(bot_pid, worker_proc.pid if worker_proc else None).items()}
            await asyncio.sleep(0.5)
            stats = await ask("stats")
            if spy is not None:
                spy.send_signal(2)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    spy.wait(30)

            async with db.sessions() as s:
                queued = await s.scalar(select(func.count()).select_from(Turn))

            _print_report(args, driver, stats, queued, waited, idle, load_before, span, cpu_used)

            await ask("stop")
            bot_proc.join(15)
            if worker_proc is not None:
                stop_worker.set()
                worker_proc.join(40)
            for p in (bot_proc, worker_proc):
                if p is not None and p.is_alive():
                    p.terminate()
                    p.join(5)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--channels", type=int, default=500)
    p.add_argument("--guilds", type=int, default=1)
    p.add_argument("--mode", choices=("pipeline", "phases"), default="pipeline",
                   help="pipeline: each channel start -> join -> act as soon as answered, all channels at once; "
                        "phases: every start at once, then every join, then every act")
    p.add_argument("--preview-worker", dest="worker", action="store_true", default=True, help="run one preview worker (default)")
    p.add_argument("--no-worker", dest="worker", action="store_false")
    p.add_argument("--delay", type=float, default=0.4, help="seconds the preview backend takes per turn")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--steps", type=int, choices=(1, 2, 3), default=3, help="1: /game start only, 2: and /game join, 3: and /act")
    p.add_argument("--py-spy", metavar="SVG", help="record a py-spy flame graph of the bot process meanwhile (.txt: collapsed stacks, .json: speedscope)")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
