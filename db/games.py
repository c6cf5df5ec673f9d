"""A channel's games, past and present: a reset archives a game and starts the next, so a channel
holds a numbered list of them (1 = its first). /games lists them; /history and /export take a
game's number to reach an archived one."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import GameSession, Turn


@dataclass(frozen=True)
class GameSummary:
    number: int  # 1-based, in the order the channel's games started
    session: GameSession
    turns: int  # every turn taken (done, failed, cancelled or waiting)
    done: int  # turns with a finished shot (not taken down)


async def channel_games(s: AsyncSession, channel_id: int) -> list[GameSummary]:
    """The channel's games, oldest first, with their turn counts."""
    counts = (
        select(
            Turn.session_id,
            func.count().label("turns"),
            func.count().filter(Turn.status == "done", Turn.removed_at.is_(None)).label("done"),
        )
        .group_by(Turn.session_id)
        .subquery()
    )
    q = (
        select(GameSession, func.coalesce(counts.c.turns, 0), func.coalesce(counts.c.done, 0))
        .outerjoin(counts, counts.c.session_id == GameSession.id)
        .where(GameSession.channel_id == channel_id)
        .order_by(GameSession.created_at, GameSession.id)
    )
    return [GameSummary(n, gs, turns, done) for n, (gs, turns, done) in enumerate((await s.execute(q)).all(), 1)]


async def game_by_number(s: AsyncSession, channel_id: int, number: int) -> GameSession | None:
    """The channel's game `number` (1: its first); None if it has no such game."""
    if number < 1:
        return None
    q = (
        select(GameSession)
        .where(GameSession.channel_id == channel_id)
        .order_by(GameSession.created_at, GameSession.id)
        .offset(number - 1)
        .limit(1)
    )
    return (await s.scalars(q)).first()


async def game_count(s: AsyncSession, channel_id: int) -> int:
    """How many games the channel has had."""
    return await s.scalar(select(func.count()).select_from(GameSession).where(GameSession.channel_id == channel_id)) or 0
