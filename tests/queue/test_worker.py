"""In-process workers against the real Postgres: results, failures, context, NOTIFY, progress."""

from __future__ import annotations

import asyncio

import aiohttp
from sqlalchemy import select, text
from sqlalchemy.orm import undefer

from db import notify
from db.listen import Listener
from db.models import Turn
from inference.backend import BackendError
from inference.queue import defer_turn
from testkit.queue import all_finished, job_rows, new_session, submit, turn_rows, wait_until


async def test_turn_runs_and_notifies(sessions, start_worker, database_url):
    gs = await new_session(sessions, 100)
    async with Listener(database_url, [notify.TURN_FINISHED, notify.TURN_PROGRESS]) as listener:
        await start_worker(backend_options={"delay": 0.5})
        turn = await submit(sessions, gs, "fly on broomstick")
        got = []
        while not any(n.channel == notify.TURN_FINISHED for n in got):
            got.append(await listener.next(timeout=20))
    finished = [n for n in got if n.channel == notify.TURN_FINISHED][0]
    assert finished.payload == {"turn_id": turn.id, "session_id": gs.id, "channel_id": 100, "status": "done"}
    progress = [n.payload for n in got if n.channel == notify.TURN_PROGRESS]
    assert progress and all(p["turn_id"] == turn.id for p in progress)
    assert [p["progress"] for p in progress] == sorted(p["progress"] for p in progress)

    async with sessions() as s:
        t = (await s.scalars(select(Turn).where(Turn.id == turn.id).options(undefer(Turn.mp4)))).one()
    assert t.status == "done" and t.is_preview and t.backend == "preview"
    assert t.mp4[4:8] == b"ftyp" and t.mp4_size == len(t.mp4)
    assert t.motion_level == 5 and t.motion_scope == 40.0  # "quickly fly": fast + brisk
    assert t.states_after["qiqi"]["stamina"] == 50 + 5 * t.delta_stamina
    assert {"queue_wait", "total", "render", "encode"} <= set(t.timings)
    assert t.attempts == 1 and t.progress == 1.0


class ScriptedBackend:
    """The preview backend, except that some motions fail; it records what it was asked."""

    name = "scripted"
    is_preview = True

    def __init__(self) -> None:
        from inference.backends.preview import PreviewBackend

        self.inner = PreviewBackend(render=False)
        self.requests = []

    def load(self) -> None:
        pass

    def generate(self, request, progress):
        self.requests.append(request)
        if request.motion == "explode":
            raise BackendError("The model ran out of memory on this turn; try a simpler instruction.")
        if request.motion == "crash":
            raise ZeroDivisionError("bug")
        return self.inner.generate(request, progress)


async def test_failed_turn_is_recorded_and_next_uses_last_good_context(sessions, start_worker):
    backend = ScriptedBackend()
    await start_worker(backend=backend)
    gs = await new_session(sessions, 110)
    for m in ("walk", "explode", "crash", "run"):
        await submit(sessions, gs, m)
    await wait_until(lambda: all_finished(sessions, 4))
    rows = await turn_rows(sessions, gs.id)
    assert [t.status for t in rows] == ["done", "failed", "failed", "done"]
    assert rows[1].error == "The model ran out of memory on this turn; try a simpler instruction."
    assert rows[2].error == "generator_failed:ZeroDivisionError"  # a code, read through game.turn_texts
    # The last turn's context: the last good turns only (the failed ones are skipped).
    last = backend.requests[-1]
    assert [h.instruction for h in last.history] == [rows[0].instruction]
    assert rows[3].states_before == rows[0].states_after
    await wait_until(lambda: _jobs_finished(sessions, 4))  # failed turns end their jobs normally


async def test_job_delivered_twice_writes_one_result(sessions, start_worker):
    gs = await new_session(sessions, 120)
    turn = await submit(sessions, gs, "run")
    async with sessions() as s, s.begin():  # a second delivery of the same turn
        await defer_turn(s, turn.id, gs.id, gs.film_id)
    await start_worker()
    await wait_until(lambda: _jobs_finished(sessions, 2))
    [t] = await turn_rows(sessions, gs.id)
    assert t.status == "done" and t.attempts == 1
    assert t.states_after["qiqi"]["stamina"] == 50 + 5 * t.delta_stamina


async def test_concurrent_runs_of_one_turn_write_one_result(sessions, qsettings):
    # Even without the session lock (a false stall detection), one result is written.
    import concurrent.futures

    from inference.metrics import WorkerMetrics
    from inference.turn_runner import TurnRunner

    gs = await new_session(sessions, 130)
    turn = await submit(sessions, gs, "run", enqueue=_no_job)
    runner = TurnRunner(
        sessions=sessions, backend=ScriptedBackend(), settings=qsettings, metrics=WorkerMetrics("scripted"),
        executor=concurrent.futures.ThreadPoolExecutor(2), progress_interval=0.05, concurrency=2,
    )
    outcomes = await asyncio.gather(runner.run(turn.id), runner.run(turn.id))
    assert sorted(outcomes) in (["discarded", "done"], ["done", "nothing to do"])
    [t] = await turn_rows(sessions, gs.id)
    assert t.status == "done" and t.states_after["qiqi"]["stamina"] == 50 + 5 * t.delta_stamina


async def _no_job(s, turn, gs):
    return None


async def _jobs_finished(sessions, n):
    jobs = await job_rows(sessions)
    return len(jobs) >= n and all(j.status == "succeeded" for j in jobs)


async def test_metrics_and_health(sessions, start_worker):
    w = await start_worker(metrics_port=-1)
    gs = await new_session(sessions, 140)
    await submit(sessions, gs, "walk")
    await wait_until(lambda: all_finished(sessions, 1))
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{w.bound_metrics_port}/metrics") as r:
            body = await r.text()
        async with http.get(f"http://127.0.0.1:{w.bound_metrics_port}/healthz") as r:
            health = await r.json()
            assert r.status == 200
    assert 'animegamer_turns_total{film="qiqi",status="done"} 1.0' in body
    assert 'animegamer_turn_queue_wait_seconds_count{film="qiqi"} 1.0' in body
    assert 'animegamer_turn_seconds_count{film="qiqi"} 1.0' in body
    assert "animegamer_turn_progress" in body
    assert health["ok"] and health["backend"] == "preview"


async def test_listener_reconnects_and_resyncs(sessions, database_url):
    connects = []

    async def on_connect():
        connects.append(1)

    async with Listener(database_url, [notify.TURN_QUEUED], on_connect=on_connect, keepalive=0.5) as listener:
        async with sessions() as s, s.begin():
            await s.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": listener._conn.get_server_pid()})
        gs = await new_session(sessions, 150)

        async def reconnected():
            return len(connects) == 2 and listener.connected.is_set()

        # The reader notices the drop while waiting and reconnects; on_connect lets it resync.
        waiter = asyncio.create_task(listener.next(timeout=20))
        await wait_until(reconnected, timeout=20)
        turn = await submit(sessions, gs, "walk", enqueue=_no_job)
        n = await waiter
    assert n.channel == notify.TURN_QUEUED and n.payload["turn_id"] == turn.id


async def test_regenerate_latest_runs_again(sessions, start_worker):
    from db.models import GameSession
    from inference.queue import make_enqueue
    from service import turn_queue as turn_service

    await start_worker()
    gs = await new_session(sessions, 160)
    await submit(sessions, gs, "walk")
    await wait_until(lambda: all_finished(sessions, 1))
    [before] = await turn_rows(sessions, gs.id)
    async with sessions() as s, s.begin():
        await turn_service.regenerate_latest(s, await s.get(GameSession, gs.id), make_enqueue())
    await wait_until(lambda: all_finished(sessions, 1))
    [after] = await turn_rows(sessions, gs.id)
    assert after.status == "done" and after.seed != before.seed and after.attempts == 2
    assert after.states_before == before.states_before  # the first result was undone, not stacked
    assert len(await job_rows(sessions)) == 2


async def test_stop_within_grace_finishes_the_turn(sessions, start_worker):
    w = await start_worker(grace=30, backend_options={"delay": 1.0})
    gs = await new_session(sessions, 170)
    await submit(sessions, gs, "walk")
    await submit(sessions, gs, "run")

    async def running():
        return any(t.status == "running" for t in await turn_rows(sessions, gs.id))

    await wait_until(running)
    w.stop()
    await asyncio.wait_for(w.task, 30)
    rows = await turn_rows(sessions, gs.id)
    # The running turn finished; the next one was not taken.
    assert [t.status for t in rows] == ["done", "queued"]
    assert [j.status for j in await job_rows(sessions)] == ["succeeded", "todo"]
