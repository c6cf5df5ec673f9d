"""The fair order (issue #39) on a real Postgres with real workers: servers, then their channels,
take turns; the position a member is shown is the place the workers give; each session's turns
still run strictly in order, through kill -9 and restarts of workers.

The preview backend stands in for the model (small frames); orders are read from the database
(each turn's `started_at`), never from timings."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter

from sqlalchemy import select, text

from db import sessions as session_service
from db.guilds import Limits
from db.models import Turn
from game.catalogue import FILMS
from inference.queue import queue_positions
from service import shares
from testkit.queue import (
    all_finished,
    start_worker_process,
    stop_processes,
    submit,
    turn_rows,
    wait_until,
)
from tests.queue.test_processes import _assert_strictly_ordered

LIMITS = Limits(max_instruction_len=300, cooldown_seconds=0, backlog_cap=50)
MOTIONS = ("walk", "run", "talk", "eat", "sleep", "wave")


async def _game(sessions, guild: int, channel: int):
    async with sessions() as s, s.begin():
        gs = await session_service.start_session(s, guild, channel, FILMS["qiqi"], created_by=1)
        await session_service.join(s, gs, FILMS["qiqi"], 1, "user1", "qiqi")
    return gs


async def _server(sessions, guild: int, channels: int, turns: int) -> list:
    """A server with `channels` live games, each with `turns` queued turns (submitted one round
    at a time across its channels, as busy players would)."""
    games = [await _game(sessions, guild, guild * 100 + c) for c in range(channels)]
    for k in range(turns):
        for gs in games:
            await submit(sessions, gs, MOTIONS[k % len(MOTIONS)], limits=LIMITS)
    return games


async def _started_order(sessions) -> list[tuple[int, int, int]]:
    """(turn id, guild, channel) of every started turn, in the order workers took them."""
    async with sessions() as s:
        rows = await s.execute(text(
            "SELECT t.id, g.guild_id, g.channel_id FROM turns t JOIN game_sessions g ON g.id = t.session_id"
            " WHERE t.started_at IS NOT NULL ORDER BY t.started_at, t.id"))
        return [tuple(r) for r in rows]


async def _queued_ids(sessions) -> list[int]:
    async with sessions() as s:
        return list((await s.scalars(select(Turn.id).where(Turn.status == "queued"))).all())


async def test_a_lone_turn_passes_a_flood_and_every_position_shown_is_the_true_one(start_worker, sessions):
    await _server(sessions, 1, channels=10, turns=5)  # a flood: 10 channels at a backlog of 5
    await _server(sessions, 2, channels=2, turns=3)  # a steady server
    lone = await submit(sessions, await _game(sessions, 3, 300), "walk", limits=LIMITS)
    async with sessions() as s:
        shown = await queue_positions(s, await _queued_ids(sessions))
    assert sorted(shown.values()) == list(range(1, 58))
    assert shown[lone.id] == 3  # none served yet: one turn of each of the two other servers first (by age)

    await start_worker(films=["qiqi"])  # one worker: the order it takes is the whole order
    await wait_until(lambda: all_finished(sessions, 57), timeout=120, what="every turn done")
    taken = [tid for tid, _, _ in await _started_order(sessions)]
    assert taken == sorted(shown, key=shown.__getitem__)


async def test_a_lone_turn_arriving_during_a_flood_waits_behind_the_running_turn_and_one_more(start_worker, sessions):
    await start_worker(films=["qiqi"], backend_options={"delay": 0.3})
    await _server(sessions, 1, channels=10, turns=5)
    await wait_until(lambda: _done_count(sessions, 1), what="the flood under way")
    lone = await submit(sessions, await _game(sessions, 3, 300), "walk", limits=LIMITS)
    async with sessions() as s:
        assert (await queue_positions(s, [lone.id]))[lone.id] <= 2
    await wait_until(lambda: _started(sessions, lone.id), timeout=60, what="the lone turn started")
    async with sessions() as s:
        passed = await s.scalar(text(
            "SELECT count(*) FROM turns WHERE id <> :id AND started_at > (SELECT created_at FROM turns WHERE id = :id)"
            " AND started_at < (SELECT started_at FROM turns WHERE id = :id)"), {"id": lone.id})
    assert passed <= 1


async def _done_count(sessions, n: int) -> bool:
    async with sessions() as s:
        return await s.scalar(text("SELECT count(*) FROM turns WHERE status = 'done'")) >= n


async def _started(sessions, turn_id: int) -> bool:
    async with sessions() as s:
        return await s.scalar(text("SELECT started_at IS NOT NULL FROM turns WHERE id = :id"), {"id": turn_id})


async def test_servers_with_1_5_and_20_busy_channels_get_equal_turns_and_channels_share_equally(start_worker, sessions):
    await _server(sessions, 1, channels=1, turns=25)
    five = await _server(sessions, 2, channels=5, turns=5)
    await _server(sessions, 3, channels=20, turns=2)
    for _ in range(2):  # two workers: a one-channel server's turns run one at a time, yet keep its share
        await start_worker(films=["qiqi"], backend_options={"delay": 0.02})
    await wait_until(lambda: _done_count(sessions, 62), timeout=150, what="60 turns done")
    order = (await _started_order(sessions))[:60]  # all three servers had turns waiting meanwhile
    assert len(order) == 60
    per_server = Counter(guild for _, guild, _ in order)
    assert all(18 <= per_server[g] <= 22 for g in (1, 2, 3)), per_server  # 20 each, within 10 %
    # The five-channel server's first 15 turns: 3 from each channel.
    per_channel = Counter(channel for _, guild, channel in [o for o in order if o[1] == 2][:15])
    assert set(per_channel) == {gs.channel_id for gs in five} and set(per_channel.values()) == {3}, per_channel


async def test_each_session_stays_in_order_through_kill_9_and_restarts(sessions, database_url, tmp_path):
    games = [g for guild, n in ((1, 4), (2, 1), (3, 2)) for g in await _server(sessions, guild, channels=n, turns=4)]
    total = 4 * len(games)

    async def worker(name: str):
        """A worker process (no grace: SIGTERM hands its running turn back at once) and its id. Its
        heartbeats count as stalled after 5 s: 2 s took a live worker for dead on a loaded 2-core
        machine, and its turn ran a third time."""
        known = set(await _worker_ids(sessions))
        proc = start_worker_process(database_url, "--no-render", "--preview-delay", "1", "--grace", "0",
                                    stalled_after=5, log_path=tmp_path / f"{name}.log")
        procs.append(proc)
        new = await wait_until(lambda: _new_worker(sessions, known), timeout=90, what=f"worker {name} registered")
        return proc, new

    procs: list = []
    try:
        a, a_id = await worker("a")
        b, b_id = await worker("b")
        killed = await wait_until(lambda: _busy(sessions, a_id, done=3), timeout=90, what="a mid-turn, turns done")
        a.send_signal(signal.SIGKILL)  # mid-turn: the sweep hands its job back, and the turn runs again
        await asyncio.to_thread(a.wait)
        await worker("c")
        released = await wait_until(lambda: _busy(sessions, b_id, done=8), timeout=90, what="b mid-turn, more turns done")
        b.send_signal(signal.SIGTERM)  # a restart: its running turn goes back to the queue
        await asyncio.to_thread(b.wait, 30)
        await worker("d")
        await wait_until(lambda: all_finished(sessions, total), timeout=120, what="every turn done")
    finally:
        stop_processes(procs)
    rows = await turn_rows(sessions)
    assert len(rows) == total and all(t.status == "done" for t in rows)
    attempts = {t.id: t.attempts for t in rows}
    assert attempts[killed] == attempts[released] == 2  # the two turns cut off mid-way ran again, once
    _assert_strictly_ordered(rows)  # each turn started after the previous one's result, saw its states
    async with sessions() as s:
        jobs = (await s.execute(text("SELECT status, count(*) FROM procrastinate_jobs GROUP BY status"))).all()
    assert dict(jobs) == {"succeeded": total}  # one job per turn, each finished once


async def _worker_ids(sessions) -> list[int]:
    async with sessions() as s:
        return list((await s.scalars(text("SELECT id FROM procrastinate_workers"))).all())


async def _new_worker(sessions, known: set[int]) -> int | None:
    new = set(await _worker_ids(sessions)) - known
    return new.pop() if new else None


async def _busy(sessions, worker_id: int, done: int) -> int | None:
    """The turn worker `worker_id` is in the first half of (so that it cannot finish before a
    signal lands), once at least `done` turns are done."""
    async with sessions() as s:
        return await s.scalar(text(
            "SELECT t.id FROM procrastinate_jobs j JOIN turns t ON t.job_id = j.id"
            " WHERE j.worker_id = :w AND j.status = 'doing' AND t.status = 'running' AND t.progress < 0.5"
            " AND (SELECT count(*) FROM turns WHERE status = 'done') >= :n"), {"w": worker_id, "n": done})


async def test_a_server_weighted_2_gets_twice_the_turns_and_usage_is_counted_per_server(start_worker, sessions):
    await shares.set_share(sessions, 1, "operator", weight=2)  # a partner community
    await _server(sessions, 1, channels=3, turns=10)
    await _server(sessions, 2, channels=3, turns=10)
    async with sessions() as s:
        shown = await queue_positions(s, await _queued_ids(sessions))
    await start_worker(films=["qiqi"])
    await wait_until(lambda: all_finished(sessions, 60), timeout=120, what="every turn done")
    order = await _started_order(sessions)
    first = Counter(guild for _, guild, _ in order[:30])  # both still had turns waiting
    assert (first[1], first[2]) == (20, 10)
    assert [tid for tid, _, _ in order] == sorted(shown, key=shown.__getitem__)  # the places shown, weights counted
    used = {u.guild_id: u for u in await shares.usage(sessions, 1)}
    assert used[1].turns == used[2].turns == 30 and used[1].gpu_seconds > 0 and used[2].gpu_seconds > 0
