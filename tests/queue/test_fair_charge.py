"""A server is charged once per turn in the fair order: a job taken again after its worker died
(or after a transient failure) costs its server nothing more, on a real Postgres."""

from __future__ import annotations

from sqlalchemy import select

from db import sessions as session_service
from db import turns
from db.models import GameSession, QueueClock, QueueShare
from game.catalogue import FILMS
from game.instruction import build_instruction
from inference import procrastinate_adapter as adapter
from inference.queue import make_app, make_enqueue

QIQI = FILMS["qiqi"]


async def _queued_turn(sessions, guild: int, channel: int) -> int:
    async with sessions.begin() as s:
        gs = await session_service.start_session(s, guild, channel, QIQI, created_by=1)
        await session_service.join(s, gs, QIQI, 1, "user1", "qiqi")
        gs = await s.get(GameSession, gs.id)
        assert gs is not None
        ins = build_instruction(QIQI, ["qiqi"], "walk", "town", "quickly", "day")
        turn = await turns.insert_turn(s, gs, author_id=1, author_name="user1", instruction=ins, enqueue=make_enqueue())
        assert turn.job_id is not None
        return turn.job_id


async def _charges(sessions) -> tuple[list[tuple[int, float]], list[float]]:
    async with sessions() as s:
        shares = [(r.guild_id, r.pass_) for r in (await s.scalars(select(QueueShare).order_by(QueueShare.guild_id))).all()]
        clocks = list((await s.scalars(select(QueueClock.vtime))).all())
    return shares, clocks


async def test_a_job_taken_again_after_a_retry_is_not_charged_twice(sessions, database_url):
    job_id = await _queued_turn(sessions, 7, 700)
    app = make_app(database_url, pool_size=1)
    async with app.open_async():
        connector = app.connector  # worker id None: no worker row is needed to take a job here
        taken = await adapter.fetch_fair(connector, None, None)
        assert taken is not None and taken["id"] == job_id and taken["attempts"] == 0
        assert await _charges(sessions) == ([(7, 1.0)], [0.0])  # its virtual start 0, its next 0 + 1 / weight 1

        async with sessions.begin() as s:  # its worker died: the sweep puts the job back (retry_stalled)
            await adapter.retry_job_now(s, job_id)
        again = await adapter.fetch_fair(connector, None, None)
        assert again is not None and again["id"] == job_id and again["attempts"] == 1
        assert await _charges(sessions) == ([(7, 1.0)], [0.0])  # unchanged: the same turn, charged once

        second = await _queued_turn(sessions, 7, 701)  # the server's next turn is charged as usual
        assert (await adapter.fetch_fair(connector, None, None))["id"] == second
        assert await _charges(sessions) == ([(7, 2.0)], [1.0])
