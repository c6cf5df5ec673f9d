"""db.queue_stats against a real Postgres: turns waiting per film and the age of the oldest, for the
bot's queue gauges (only 'queued' turns wait; running, finished and cancelled ones do not)."""

from __future__ import annotations

from sqlalchemy import func, update

from contracts.turn import TurnResult
from db import queue_stats, turn_reads, turn_results, turns
from db import sessions as gsess
from db.models import GameSession, Turn
from game.catalogue import FILMS
from game.instruction import build_instruction
from game.states import Prediction

GUILD = 100


async def _game(sessions, channel: int, film: str) -> GameSession:
    f = FILMS[film]
    char = f.characters[0].id
    async with sessions.begin() as s:
        gs = await gsess.start_session(s, GUILD, channel, f, created_by=1)
        await gsess.join(s, gs, f, 1, "alice", char)
    return gs


async def _submit(sessions, gs: GameSession) -> Turn:
    f = FILMS[gs.film_id]
    async with sessions.begin() as s:
        gs = await s.get(GameSession, gs.id)
        ins = build_instruction(f, [f.characters[0].id], "walk", "sky", "quickly", "night")
        return await turns.insert_turn(s, gs, author_id=1, author_name="alice", instruction=ins, enqueue=None)


def _result() -> TurnResult:
    return TurnResult(prediction=Prediction(3, 1, 2, -1), motion_scope=10.0, mp4=None, representation=None,
                      is_preview=True, timings={"render": 0.1})


async def _age(sessions, turn: Turn, seconds: float) -> None:
    async with sessions.begin() as s:
        await s.execute(
            update(Turn).where(Turn.id == turn.id).values(created_at=func.now() - func.make_interval(0, 0, 0, 0, 0, 0, seconds))
        )


async def test_nothing_waiting_is_an_empty_map(sessions):
    async with sessions() as s:
        assert await queue_stats.waiting_by_film(s) == {}
    await _game(sessions, 200, "qiqi")  # a game without turns
    async with sessions() as s:
        assert await queue_stats.waiting_by_film(s) == {}


async def test_waiting_turns_per_film_with_the_oldest_age(sessions):
    qiqi_a = await _game(sessions, 200, "qiqi")
    qiqi_b = await _game(sessions, 201, "qiqi")
    ponyo = await _game(sessions, 300, "ponyo")

    waiting = [await _submit(sessions, qiqi_a), await _submit(sessions, qiqi_a), await _submit(sessions, qiqi_b)]
    await _age(sessions, waiting[0], 30)
    await _age(sessions, waiting[2], 600)  # the oldest of qiqi's waiting turns, in another channel

    # Turns that do not wait, however old: one running, one done, one cancelled (all ponyo).
    running, done, cancelled = [await _submit(sessions, ponyo) for _ in range(3)]
    for t in (running, done, cancelled):
        await _age(sessions, t, 3600)
    async with sessions.begin() as s:
        assert await turn_results.start_turn(s, done.id, 2) is not None
    async with sessions.begin() as s:
        assert await turn_results.complete_turn(s, done.id, _result(), "test")
        assert await turn_results.start_turn(s, running.id, 2) is not None
        row = await turn_reads.get_turn(s, cancelled.id)
        assert row is not None
        await turns.cancel_turn(s, row, "by a moderator")

    async with sessions() as s:
        stats = await queue_stats.waiting_by_film(s)
    assert set(stats) == {"qiqi"}  # ponyo has nothing waiting
    count, oldest = stats["qiqi"]
    assert count == 3
    assert 600 <= oldest < 660

    # A ponyo turn in another channel, just submitted: it waits, aged about 0 s.
    fresh = await _submit(sessions, await _game(sessions, 301, "ponyo"))
    async with sessions() as s:
        stats = await queue_stats.waiting_by_film(s)
    assert stats["ponyo"][0] == 1 and 0 <= stats["ponyo"][1] < 60
    # Taken by a worker: it stops waiting.
    async with sessions.begin() as s:
        assert await turn_results.start_turn(s, fresh.id, 2) is not None
    async with sessions() as s:
        assert "ponyo" not in await queue_stats.waiting_by_film(s)


async def test_the_gauges_query_reads_the_waiting_turns_index(sessions):
    """Scraped every few seconds: on a history of finished turns the plan reaches the few queued
    ones through ix_turns_waiting (a partial index on status = 'queued') rather than reading every
    turn ever played."""
    from sqlalchemy import text

    gs = await _game(sessions, 10, "qiqi")
    turn = await _submit(sessions, gs)
    columns = [c.name for c in Turn.__table__.columns if c.name not in ("id", "seq", "status")]
    async with sessions.begin() as s:  # 20,000 finished turns, copies of the queued one
        await s.execute(text(
            f"INSERT INTO turns ({', '.join(columns)}, seq, status) "
            f"SELECT {', '.join(columns)}, seq + g, 'done' FROM turns, generate_series(1, 20000) g WHERE id = :id"
        ), {"id": turn.id})
    async with sessions() as s:
        await s.execute(text("ANALYZE turns"))
        compiled = queue_stats._query().compile(compile_kwargs={"literal_binds": True})
        plan = "\n".join(row[0] for row in await s.execute(text(f"EXPLAIN {compiled}")))
    assert "ix_turns_waiting" in plan, plan
    assert "Seq Scan on turns" not in plan, plan
