"""In-process workers against the real Postgres: results, failures, context, NOTIFY, progress."""

from __future__ import annotations

import json

from sqlalchemy import select, text
from sqlalchemy.orm import undefer

from db import notify
from db.listen import Listener
from db.models import Turn
from tests.queue.helpers import all_finished, new_session, submit, turn_rows, wait_until


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
