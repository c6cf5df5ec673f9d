"""Previews through a real worker (preview backend) and Postgres: stored with the progress, named in
its NOTIFY, cleared at the end; none for a server that turned them off."""

from __future__ import annotations

import io

from PIL import Image
from sqlalchemy import select
from sqlalchemy.orm import undefer

from db import notify, turn_previews
from db import sessions as session_service
from db.listen import Listener
from db.models import GuildSettings, Turn
from game.catalogue import FILMS
from testkit.queue import new_session, submit


async def _run_turn(sessions, database_url, gs, still_seen: list) -> list[dict]:
    async with Listener(database_url, [notify.TURN_FINISHED, notify.TURN_PROGRESS]) as listener:
        turn = await submit(sessions, gs, "fly on broomstick")
        got = []
        while not any(n.channel == notify.TURN_FINISHED for n in got):
            n = await listener.next(timeout=20)
            got.append(n)
            if n.channel == notify.TURN_PROGRESS and "preview" in n.payload:
                async with sessions() as s:
                    still_seen.append((n.payload["preview"], await turn_previews.latest(s, turn.id)))
    async with sessions() as s:
        t = (await s.scalars(select(Turn).where(Turn.id == turn.id).options(undefer(Turn.preview)))).one()
    assert t.status == "done" and t.preview is None and t.preview_no is None  # the clip replaced it
    return [n.payload for n in got if n.channel == notify.TURN_PROGRESS]


async def test_previews_are_stored_with_progress_and_notified(sessions, start_worker, database_url, qsettings):
    settings = qsettings.model_copy(update={"preview_interval": 0.0, "preview_max": 4})
    await start_worker(settings=settings, backend_options={"delay": 2.0})
    gs = await new_session(sessions, 300)
    seen: list = []
    progress = await _run_turn(sessions, database_url, gs, seen)
    numbers = [p["preview"] for p in progress if "preview" in p]
    assert numbers and numbers == sorted(set(numbers)) and max(numbers) <= 4
    read = [x for x in seen if x[1] is not None]
    assert read, "the still was readable while the turn ran"
    for number, (stored_no, data) in read:
        assert stored_no >= number
        img = Image.open(io.BytesIO(data))
        assert img.format == "WEBP" and max(img.size) <= 360


async def test_a_server_that_turned_previews_off_gets_none(sessions, start_worker, database_url, qsettings):
    settings = qsettings.model_copy(update={"preview_interval": 0.0})
    await start_worker(settings=settings, backend_options={"delay": 1.0})
    async with sessions() as s, s.begin():  # a server of its own, which turned previews off
        gs = await session_service.start_session(s, 310, 310, FILMS["qiqi"], created_by=1)
        await session_service.join(s, gs, FILMS["qiqi"], 1, "user1", "qiqi")
        s.add(GuildSettings(guild_id=310, previews=False))
    progress = await _run_turn(sessions, database_url, gs, [])
    assert progress and not any("preview" in p for p in progress)
