"""Turns: queueing one (the rows of a submission, a cancel, a regeneration; the checks before
them are the service's: service.turn_queue). Their other modules: db.turn_reads
(reading turns: by id or number, pending, history, clips for /export), db.turn_results (the
worker's start/progress/complete/fail/requeue) and db.turn_posts (posting finished turns, their
status messages, pruning clips).

Each function that must be atomic does its work in the caller's transaction (the caller commits
once): a turn row and its queue job are inserted together; a result, the new character states
and the NOTIFY are written together.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db import notify
from db.bounds import REASON_LEN, free_text, name_text, require_id
from db.models import PENDING_TURN_STATUSES, CharacterStateRow, GameSession, Turn
from db.sessions import ensure_states, session_by_id, touch
from game.instruction import Instruction
from game.stored_reasons import CANCELLED
from game.turn_errors import TurnNotCancellable

# enqueue(session, turn, game_session) -> job id: defers the generation job in the same transaction.
Enqueue = Callable[[AsyncSession, Turn, GameSession], Awaitable[int | None]]


def new_seed() -> int:
    return secrets.randbits(62)


def instruction_columns(instruction: Instruction) -> dict:
    """An instruction as the columns a turn (and a vote proposal) stores it in."""
    return {
        "characters": list(instruction.character_ids),
        "motion": instruction.motion,
        "adverb": instruction.adverb,
        "background": instruction.background,
        "time_of_day": instruction.time_of_day,
        "instruction": instruction.text,
    }


async def lock_session(s: AsyncSession, gs: GameSession) -> None:
    """Lock the game's row until the transaction ends, and read it again: turns take their
    numbers under this lock, and the checks before a write (service.turn_queue) read it."""
    await s.refresh(gs, with_for_update=True)


async def waiting_count(s: AsyncSession, session_id: int) -> int:
    """The game's queued and running turns."""
    q = select(func.count()).select_from(Turn).where(Turn.session_id == session_id, Turn.status.in_(PENDING_TURN_STATUSES))
    return (await s.execute(q)).scalar_one()


async def last_turn_at(s: AsyncSession, author_id: int, guild_id: int) -> datetime | None:
    """When the member last asked for a turn in the server (cancelled ones left out)."""
    return await s.scalar(
        select(func.max(Turn.created_at))
        .join(GameSession, GameSession.id == Turn.session_id)
        .where(Turn.author_id == author_id, GameSession.guild_id == guild_id, Turn.status != "cancelled")
    )


async def db_now(s: AsyncSession) -> datetime:
    """The database's clock (the one turns' created_at is written with)."""
    return (await s.execute(select(func.now()))).scalar_one()


async def insert_turn(
    s: AsyncSession, gs: GameSession, *, author_id: int, author_name: str, instruction: Instruction, enqueue: Enqueue | None
) -> Turn:
    """Insert the next turn of `gs` (locked and checked by the caller: service.turn_queue), its
    characters' starting states and its job, in the caller's transaction; NOTIFY at commit."""
    require_id(author_id, "player id")
    turn = Turn(
        session_id=gs.id,
        seq=gs.next_seq,
        author_id=author_id,
        author_name=name_text(author_name),
        **instruction_columns(instruction),
        seed=new_seed(),
    )
    gs.next_seq += 1
    s.add(turn)
    await s.flush()
    await ensure_states(s, gs.id, list(instruction.character_ids))
    if enqueue is not None:
        turn.job_id = await enqueue(s, turn, gs)
    await touch(s, gs.id)
    await notify.notify(s, notify.TURN_QUEUED, turn_id=turn.id, session_id=gs.id, channel_id=gs.channel_id)
    return turn


async def cancel_turn(s: AsyncSession, turn: Turn, reason: str = CANCELLED) -> Turn:
    """Cancel a queued turn; `reason`: a cancel code (game.stored_reasons), rendered where it is
    shown. Who cancelled it and their words are noted apart (note_canceller).

    Its one refusal stays here: the queue (inference.queue.cancel_queued_turn, below the service)
    cancels through it, and only the locked row can say the turn is still queued."""
    await s.refresh(turn, with_for_update=True)
    if turn.status != "queued":
        raise TurnNotCancellable(turn.status)
    turn.status = "cancelled"
    turn.error = free_text(reason, REASON_LEN) or CANCELLED
    turn.finished_at = func.now()
    await s.flush()
    gs = await session_by_id(s, turn.session_id)
    await notify.notify(s, notify.TURN_QUEUED, turn_id=turn.id, session_id=gs.id, channel_id=gs.channel_id)
    return turn


async def note_canceller(s: AsyncSession, turn: Turn, by: str | None, note: str | None = None) -> None:
    """Who cancelled `turn` (their name as shown now; None: a moderator left unnamed) and a
    moderator's own words, kept beside its cancel code, in the cancel's transaction."""
    turn.cancelled_by_name = name_text(by) if by else None
    turn.cancel_note = free_text(note, REASON_LEN)
    await s.flush()


async def requeue_finished(s: AsyncSession, gs: GameSession, turn: Turn, enqueue: Enqueue | None) -> Turn:
    """Queue the finished `turn` of `gs` again with a new seed, under the same number; its effect
    on the characters is undone first. The caller locked both rows and checked that it may
    (service.turn_queue.regenerate_latest)."""
    if turn.status == "done" and turn.states_before:
        for cid, st in turn.states_before.items():
            await s.execute(
                update(CharacterStateRow)
                .where(CharacterStateRow.session_id == gs.id, CharacterStateRow.character_id == cid)
                .values(**st, updated_at=func.now())
            )
    for col in ("motion_level", "delta_social", "delta_entertainment", "delta_stamina", "motion_scope",
                "states_before", "states_after", "representation", "mp4", "mp4_size", "clip_seconds", "error", "timings",
                "started_at", "finished_at", "posted_message_id", "posted_at", "post_claimed_at",
                "post_claimed_by", "post_retry_at", "post_error", "status_message_id", "backend"):
        setattr(turn, col, None)
    turn.status = "queued"
    turn.progress = 0.0
    turn.progress_stage = None
    turn.post_attempts = 0
    turn.is_preview = False
    turn.seed = new_seed()
    turn.created_at = func.now()
    await s.flush()
    if enqueue is not None:
        turn.job_id = await enqueue(s, turn, gs)
    await notify.notify(s, notify.TURN_QUEUED, turn_id=turn.id, session_id=gs.id, channel_id=gs.channel_id)
    return turn
