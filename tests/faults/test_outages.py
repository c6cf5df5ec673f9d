"""Database faults with everything really running: worker processes, the play page process, and
the bot (discord.py against the fake Discord), all on a private Postgres cluster that the test
restarts, stops for 30 s, and whose connections it kills every second.

The only time bound asserted is the issue's own: every queued turn is done within 30 s of the
database coming back (a generous wait, not a speed measurement).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import signal
import threading
import time
from datetime import timedelta

import aiohttp
import pytest
from sqlalchemy import select, text

from db import sessions as session_service
from db.models import GameSession, Turn
from db.runtime import open_database
from db.transient import is_transient
from game.catalogue import FILMS
from game.errors import ServiceDown
from settings import Settings
from testkit.queue import new_session, start_worker_process, submit, wait_until
from testkit.waits import Passes, wait_for
from tests.bot.helpers import is_result
from tests.faults.conftest import keep_logs
from tests.pgcluster import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BACK_WITHIN = 30.0  # the bound: queued turns done within 30 s of the database coming back


async def _tolerant(fn, default=None):
    """Run a check through the test's own connection, which the faults kill too."""
    try:
        return await fn()
    except Exception as e:
        if is_transient(e):
            return default
        raise


async def _turns(sessions) -> list[Turn]:
    async with sessions() as s:
        return list((await s.scalars(select(Turn).order_by(Turn.session_id, Turn.seq))).all())


async def _done(sessions, n: int):
    rows = await _tolerant(lambda: _turns(sessions), [])
    return rows if len(rows) == n and all(t.status == "done" for t in rows) else None


async def _count_done(sessions) -> int:
    return sum(t.status == "done" for t in await _tolerant(lambda: _turns(sessions), []))


async def _submit(sessions, gs, motion):
    """Submit through transient errors (the test's pool may hold a connection the restart killed)."""

    async def attempt():
        try:
            return await submit(sessions, gs, motion, user_id=gs.created_by)
        except Exception as e:
            if not is_transient(e):
                raise
            return None

    return await wait_for(attempt, timeout=60, interval=0.2, what="a turn submitted")


def _assert_consistent(rows: list[Turn]) -> None:
    """Each session's turns ran in order, each result applied exactly once."""
    by_session = collections.defaultdict(list)
    for t in rows:
        by_session[t.session_id].append(t)
    for turns in by_session.values():
        turns.sort(key=lambda t: t.seq)
        stamina = 50
        for prev, nxt in itertools.pairwise(turns):
            assert nxt.started_at >= prev.finished_at, (prev.id, nxt.id)
            assert nxt.states_before == prev.states_after, (prev.id, nxt.id)
        for t in turns:
            stamina = max(0, min(100, stamina + 5 * t.delta_stamina))
        assert turns[-1].states_after["qiqi"]["stamina"] == stamina


async def _jobs(sessions):
    async with sessions() as s:
        return (await s.execute(text("SELECT status, count(*) FROM procrastinate_jobs WHERE task_name = 'generate_turn' GROUP BY 1"))).all()


async def _health(port: int) -> int | None:
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/healthz", timeout=aiohttp.ClientTimeout(total=3)) as r:
            return r.status
    except aiohttp.ClientError:
        return None


class PagePoller:
    """GET /api/state every 0.2 s for the whole test: the page must answer 200, or 503 in its
    JSON error format while the database is away, never a 500 or no answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.statuses: collections.Counter[int] = collections.Counter()
        self.failures: list[str] = []
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            while not self._stop.is_set():
                try:
                    async with http.get(f"{self.url}/api/state") as r:
                        body = await r.json(content_type=None)
                        self.statuses[r.status] += 1
                        if r.status == 503 and body.get("error") != ServiceDown().code:
                            self.failures.append(f"503 without the page's error format: {body}")
                        elif r.status not in (200, 503):
                            self.failures.append(f"{r.status}: {body}")
                except Exception as e:
                    self.failures.append(repr(e))
                await asyncio.sleep(0.2)  # sleep: the poller's cadence, what it samples the page at

    async def stop(self) -> None:
        self._stop.set()
        await self._task


async def _bot_game(sessions, guild_id: int, channel_id: int, user_id: int) -> GameSession:
    async with sessions() as s, s.begin():
        gs = await session_service.start_session(s, guild_id, channel_id, FILMS["qiqi"], created_by=user_id)
        await session_service.join(s, gs, FILMS["qiqi"], user_id, f"user{user_id}", "qiqi")
    return gs


def _posted(world, channels) -> list:
    return [m for ch in channels for m in world.server.channel_messages(ch) if is_result(m)]


async def test_restart_and_30s_outage_lose_nothing(pg_cluster, fault_url, fault_sessions, page_process, world, start_bot, tmp_path):
    # long: one outage story: load, restart, outage, recovery, then the count of what was kept
    pg, sessions = pg_cluster, fault_sessions
    health_port = free_port()
    workers = [
        start_worker_process(fault_url, "--no-render", "--preview-delay", "0.5", "--metrics-port", str(health_port), log_path=tmp_path / "w0.log"),
        start_worker_process(fault_url, "--no-render", "--preview-delay", "0.5", log_path=tmp_path / "w1.log"),
    ]
    page = page_process(fault_url)
    settings = Settings(database_url=fault_url, data_dir=tmp_path / "bot", cooldown_seconds=0, metrics_port=0, _env_file=None)
    poller = None
    try:
        async with open_database(settings) as bot_db:
            # A short claim lease: a post cut off by the outage between its claim and the send is
            # taken again after the lease (default 2 min; the bot's posting retries are its own).
            bot = await start_bot(db=bot_db, settings=settings, post_lease=timedelta(seconds=5),
                                  health_address=("127.0.0.1", 0))
            poller = PagePoller(await page.wait_ready())
            await wait_until(lambda: _health_is(health_port, 200), timeout=60)
            await wait_until(lambda: _health_is(bot.health_port, 200), timeout=30)

            channels = [world.guild.create_text_channel(f"fault-{i}") for i in range(6)]
            games = [await _bot_game(sessions, world.guild.id, ch.id, 100 + i) for i, ch in enumerate(channels)]
            for k in range(3):
                for gs in games:
                    await _submit(sessions, gs, ("walk", "run", "talk")[k])
            await wait_until(lambda: _at_least(sessions, 4), timeout=60)

            # 1. A fast restart (about a second) in the middle of the work.
            await asyncio.to_thread(pg.restart)
            for gs in games:
                await _submit(sessions, gs, "eat")
            await wait_until(lambda: _done(sessions, 24), timeout=BACK_WITHIN + 10)

            # 2. A 30 s outage with turns queued and running; a third worker starts meanwhile.
            for k in range(2):
                for gs in games:
                    await _submit(sessions, gs, ("sleep", "wave")[k])
            await wait_until(lambda: _at_least(sessions, 26), timeout=30)
            await asyncio.to_thread(pg.stop)
            down_at = time.monotonic()
            workers.append(start_worker_process(fault_url, "--no-render", "--preview-delay", "0.5", log_path=tmp_path / "w2.log"))
            await wait_until(lambda: _health_is(health_port, 503), timeout=20)  # the worker says it is cut off
            await wait_until(lambda: _health_is(bot.health_port, 503), timeout=20)  # and so does the bot
            await asyncio.sleep(max(0.0, 30 - (time.monotonic() - down_at)))  # sleep: the outage itself, the 30 s
            assert all(p.poll() is None for p in workers), "a worker exited during the outage"
            assert page.proc.poll() is None and not bot.is_closed()
            await asyncio.to_thread(pg.start)

            rows = await wait_until(lambda: _done(sessions, 36), timeout=BACK_WITHIN)
            await wait_until(lambda: _health_is(health_port, 200), timeout=30)
            await wait_until(lambda: _health_is(bot.health_port, 200), timeout=30)
            # The bot posts every turn, once.
            try:
                await wait_until(lambda: _posts_at_least(world, channels, 36), timeout=60)
            except AssertionError:
                raise AssertionError(f"the bot posted {len(_posted(world, channels))} of 36 turns") from None
            passes = Passes(bot.notifier, "post_pending")
            for _ in range(2):  # a couple more sweeps, each to its end: nothing is posted twice
                mark = passes.mark()
                await bot.maintenance.sweep()  # what the scheduler runs: it wakes the poster
                await passes.after(mark, timeout=60)
            posted = _posted(world, channels)
            assert len(posted) == 36
            assert not bot.is_closed()
            await poller.stop()
    except BaseException:
        keep_logs(tmp_path)
        raise
    finally:
        if poller is not None and not poller._task.done():
            await poller.stop()
        for p in workers:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
    codes = [await asyncio.to_thread(p.wait, 60) for p in workers]
    assert codes == [0, 0, 0], codes  # no exit but the one asked for
    assert page.proc.poll() is None

    _assert_consistent(rows)
    assert dict(await _jobs(sessions)) == {"succeeded": 36}
    assert poller.failures == [], poller.failures[:5]
    assert poller.statuses[200] > 0 and poller.statuses[503] > 0  # it answered, and said "down" while down


async def _dump_stuck(sessions) -> None:
    """On failure: the turns not done, with their jobs and the workers' heartbeats."""
    import sys

    async with sessions() as s:
        rows = (await s.execute(text(
            """SELECT t.id, t.session_id, t.seq, t.status, t.attempts, t.error, j.id AS job, j.status AS job_status,
                      j.worker_id, j.attempts AS job_attempts, now() - w.last_heartbeat AS beat
                 FROM turns t LEFT JOIN procrastinate_jobs j ON j.id = t.job_id
                 LEFT JOIN procrastinate_workers w ON w.id = j.worker_id
                WHERE t.status <> 'done' ORDER BY t.session_id, t.seq LIMIT 40"""))).all()
        workers = (await s.execute(text("SELECT id, now() - last_heartbeat FROM procrastinate_workers"))).all()
    print("stuck turns:", *rows, "workers:", *workers, sep="\n", file=sys.stderr)


async def _health_is(port: int, status: int) -> bool:
    return await _health(port) == status


async def _at_least(sessions, n: int) -> bool:
    return await _count_done(sessions) >= n


async def _posts_at_least(world, channels, n: int) -> bool:
    return len(_posted(world, channels)) >= n


async def test_connections_killed_every_second_for_30s(pg_cluster, fault_url, fault_sessions, tmp_path):
    pg, sessions = pg_cluster, fault_sessions
    workers = [
        start_worker_process(fault_url, "--no-render", "--preview-delay", "0.15", log_path=tmp_path / f"w{i}.log")
        for i in range(3)
    ]
    stop = threading.Event()
    killed = []

    def terminator() -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end and not stop.is_set():
            try:
                killed.append(pg.terminate_connections())
            except Exception as e:  # noqa: BLE001 (keep killing)
                killed.append(repr(e))
            time.sleep(1)  # sleep: the fault's rhythm, a kill every second (the behaviour under test)

    try:
        games = [await new_session(sessions, 700 + i) for i in range(20)]
        thread = threading.Thread(target=terminator)
        thread.start()  # the kills start with the submissions: players keep playing meanwhile
        t0 = time.monotonic()

        async def play(gs) -> None:
            for motion in ("walk", "run", "talk", "eat", "sleep", "wave", "walk", "run", "talk", "eat"):
                await _submit(sessions, gs, motion)

        await asyncio.gather(*(play(gs) for gs in games))
        t1 = time.monotonic()
        await asyncio.to_thread(thread.join)
        t2 = time.monotonic()
        done_then = await _count_done(sessions)
        assert all(p.poll() is None for p in workers), "a worker exited"
        rows = await wait_until(lambda: _done(sessions, 200), timeout=90)
        print(f"submitted in {t1 - t0:.1f} s; {done_then} done after 30 s of kills; all done {time.monotonic() - t2:.1f} s later")
    except BaseException:
        stop.set()
        keep_logs(tmp_path)
        await _dump_stuck(sessions)
        raise
    finally:
        for p in workers:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
    codes = [await asyncio.to_thread(p.wait, 60) for p in workers]
    assert codes == [0, 0, 0], codes
    assert sum(k for k in killed if isinstance(k, int)) > 30  # connections really were killed
    _assert_consistent(rows)
    assert dict(await _jobs(sessions)) == {"succeeded": 200}
