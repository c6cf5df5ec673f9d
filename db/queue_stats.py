"""What waits in the turn queues, per film, for the bot's queue gauges (bot.parts.metrics:
animegamer_queue_depth{film}, animegamer_queue_oldest_seconds{film}).

A turn waits while its status is 'queued': submitted (or handed back by a worker that stopped)
and not yet taken by a worker. 'running' turns are being generated, the others are finished.
A turn's age counts from its submission (turns.created_at), as the worker's queue-wait histogram
does, so a turn handed back on a worker's shutdown keeps its age. Ages come from the database's
clock, so the bot's clock does not skew them.
"""

from __future__ import annotations

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import GameSession, Turn

WAITING = "queued"


async def waiting_by_film(s: AsyncSession) -> dict[str, tuple[int, float]]:
    """{film id: (turns waiting, seconds since the oldest of them was submitted)}; films with
    nothing waiting are left out."""
    rows = await s.execute(_query())
    return {film: (int(n), max(0.0, float(age or 0.0))) for film, n, age in rows}


def _query() -> Select:
    """Waiting turns per film: count and oldest age (ix_turns_waiting serves the WHERE)."""
    oldest = func.extract("epoch", func.now() - func.min(Turn.created_at))
    return (
        select(GameSession.film_id, func.count(), oldest)
        .join(GameSession, GameSession.id == Turn.session_id)
        .where(Turn.status == WAITING)
        .group_by(GameSession.film_id)
    )
