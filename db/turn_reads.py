"""Reading turns: one by id or number, a session's pending turns, its history, the clips /export
stitches, the latest turn that can be regenerated.

A turn taken down (db.removal) is left out of the history and of /export."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import undefer

from db.bounds import fits_bigint, fits_int
from db.models import PENDING_TURN_STATUSES, GameSession, Turn
from db.sessions import session_by_id
from game import states as rules


async def get_turn(s: AsyncSession, turn_id: int, *, blobs: bool = False, lock: bool = False) -> Turn | None:
    if not fits_bigint(turn_id):
        return None
    q = select(Turn).where(Turn.id == turn_id)
    if blobs:
        q = q.options(undefer(Turn.mp4), undefer(Turn.representation))
    if lock:
        q = q.with_for_update()
    return (await s.scalars(q)).first()


async def turn_by_seq(s: AsyncSession, session_id: int, seq: int) -> Turn | None:
    if not fits_int(seq):
        return None
    return (await s.scalars(select(Turn).where(Turn.session_id == session_id, Turn.seq == seq))).first()


async def turn_by_message(s: AsyncSession, guild_id: int, message_id: int) -> Turn | None:
    """The turn whose post (or status message) is this Discord message, in this server."""
    if not fits_bigint(message_id) or not fits_bigint(guild_id):
        return None
    q = (
        select(Turn)
        .join(GameSession, GameSession.id == Turn.session_id)
        .where(GameSession.guild_id == guild_id, or_(Turn.posted_message_id == message_id, Turn.status_message_id == message_id))
        .order_by(Turn.id.desc())
        .limit(1)
    )
    return (await s.scalars(q)).first()


async def pending_turns(s: AsyncSession, session_id: int) -> list[Turn]:
    q = select(Turn).where(Turn.session_id == session_id, Turn.status.in_(PENDING_TURN_STATUSES)).order_by(Turn.seq)
    return list((await s.scalars(q)).all())


async def history(s: AsyncSession, session_id: int, count: int = 10, *, blobs: bool = False) -> list[Turn]:
    """The latest `count` turns of a session, oldest first."""
    q = select(Turn).where(Turn.session_id == session_id, Turn.removed_at.is_(None)).order_by(Turn.seq.desc()).limit(count)
    if blobs:
        q = q.options(undefer(Turn.mp4))
    return list(reversed((await s.scalars(q)).all()))


async def page(s: AsyncSession, session_id: int, limit: int, before: int | None = None) -> tuple[list[Turn], bool]:
    """The latest `limit` turns not taken down (before turn number `before`), oldest first, and
    whether older ones remain."""
    q = select(Turn).where(Turn.session_id == session_id, Turn.removed_at.is_(None))
    if before is not None:
        q = q.where(Turn.seq < before)
    rows = list((await s.scalars(q.order_by(Turn.seq.desc()).limit(limit + 1))).all())
    return list(reversed(rows[:limit])), len(rows) > limit


@dataclass(frozen=True)
class Shot:
    """A finished turn's clip as /export lists it; the bytes are read one clip at a time."""

    turn_id: int
    seq: int
    clip_seconds: float | None  # None for clips stored before the length was recorded


async def exportable_shots(s: AsyncSession, session_id: int, count: int) -> list[Shot]:
    """The latest `count` finished turns of a session that still have their clip, oldest first."""
    q = (
        select(Turn.id, Turn.seq, Turn.clip_seconds)
        .where(
            Turn.session_id == session_id,
            Turn.status == "done",
            Turn.mp4_size.is_not(None),
            Turn.blobs_pruned_at.is_(None),
            Turn.removed_at.is_(None),
        )
        .order_by(Turn.seq.desc())
        .limit(count)
    )
    return [Shot(*row) for row in reversed((await s.execute(q)).all())]


async def clip_bytes(s: AsyncSession, turn_id: int) -> bytes | None:
    """One turn's MP4 (None once pruned or taken down)."""
    return await s.scalar(select(Turn.mp4).where(Turn.id == turn_id, Turn.removed_at.is_(None)))


async def session_of(s: AsyncSession, turn: Turn) -> GameSession:
    return await session_by_id(s, turn.session_id)


def stored_prediction(turn: Turn) -> rules.Prediction:
    """The prediction a done turn stored (complete_turn writes the four values together)."""
    m, social, ent, stamina = turn.motion_level, turn.delta_social, turn.delta_entertainment, turn.delta_stamina
    if m is None or social is None or ent is None or stamina is None:
        raise ValueError(f"turn {turn.id} ({turn.status}) has no stored prediction")
    return rules.Prediction(m, social, ent, stamina)


async def latest_turn(s: AsyncSession, session_id: int) -> Turn | None:
    """The session's latest turn that was not cancelled: a cancelled turn never ran, so it
    cannot be regenerated and must not stop the turn before it from being regenerated."""
    q = (
        select(Turn)
        .where(Turn.session_id == session_id, Turn.status != "cancelled")
        .order_by(Turn.seq.desc())
        .limit(1)
    )
    return (await s.scalars(q)).first()
