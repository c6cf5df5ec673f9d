"""Turns: queueing one (submission, cancel, regenerate). Their other modules: db.turn_reads
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
from dataclasses import replace
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db import notify
from db.bounds import REASON_LEN, free_text, name_text, require_id
from db.guilds import Limits
from db.models import PENDING_TURN_STATUSES, CharacterStateRow, GameSession, Turn, VoteChannel
from db.sessions import ensure_states, player_of, session_by_id, touch
from db.turn_reads import latest_turn
from game.instruction import Instruction
from game.session_errors import NoSession, NotJoined, SessionPaused
from game.stored_reasons import CANCELLED
from game.turn_errors import BacklogFull, Cooldown, NoTurnToRegenerate, TurnNotCancellable, TurnNotFinished, VoteModeOn

# enqueue(session, turn, game_session) -> job id: defers the generation job in the same transaction.
Enqueue = Callable[[AsyncSession, Turn, GameSession], Awaitable[int | None]]


async def require_direct_play(s: AsyncSession, channel_id: int) -> None:
    """Refuses a direct turn where an admin chose vote mode (turns come from vote rounds there)."""
    if await s.scalar(select(VoteChannel.enabled).where(VoteChannel.channel_id == channel_id)):
        raise VoteModeOn()


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


async def submit_turn(
    s: AsyncSession,
    gs: GameSession,
    *,
    author_id: int,
    author_name: str,
    instruction: Instruction,
    limits: Limits,
    enqueue: Enqueue | None,
    now: datetime | None = None,
    via_vote: bool = False,
) -> Turn:
    """Queue one turn. Refuses (GameError) when paused, not joined, the backlog is full, or the
    author is cooling down. The session row is locked so sequence numbers never collide.

    `via_vote`: the winning proposal of a vote round (db.votes): its proposer need not have
    joined, and no cooldown applies (the round's length paces the channel)."""
    require_id(author_id, "player id")
    author_name = name_text(author_name)
    await s.refresh(gs, with_for_update=True)
    if gs.status == "paused":
        raise SessionPaused(gs.paused_reason, gs.paused_note)
    if gs.status != "active":
        raise NoSession()
    if via_vote:
        limits = replace(limits, cooldown_seconds=0)
    else:
        await require_direct_play(s, gs.channel_id)
        if await player_of(s, gs.id, author_id) is None:
            raise NotJoined()

    pending = (
        await s.execute(
            select(func.count()).select_from(Turn).where(Turn.session_id == gs.id, Turn.status.in_(PENDING_TURN_STATUSES))
        )
    ).scalar_one()
    if pending >= limits.backlog_cap:
        raise BacklogFull(limits.backlog_cap)

    if limits.cooldown_seconds > 0:
        last = await s.scalar(
            select(func.max(Turn.created_at))
            .join(GameSession, GameSession.id == Turn.session_id)
            .where(Turn.author_id == author_id, GameSession.guild_id == gs.guild_id, Turn.status != "cancelled")
        )
        if last is not None:
            now = now or (await s.execute(select(func.now()))).scalar_one()
            left = limits.cooldown_seconds - (now - last).total_seconds()
            if left > 0:
                raise Cooldown(left)

    turn = Turn(
        session_id=gs.id,
        seq=gs.next_seq,
        author_id=author_id,
        author_name=author_name,
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
    shown. Who cancelled it and their words are noted apart (note_canceller)."""
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


async def regenerate_latest(s: AsyncSession, gs: GameSession, enqueue: Enqueue | None) -> Turn:
    """Generate the session's latest finished turn again with a new seed: its effect on the
    characters is undone, and it is queued again under the same number."""
    await s.refresh(gs, with_for_update=True)
    if gs.status == "paused":
        raise SessionPaused(gs.paused_reason, gs.paused_note)
    turn = await latest_turn(s, gs.id)
    if turn is None or turn.removed_at is not None:  # a shot taken down stays down
        raise NoTurnToRegenerate()
    await s.refresh(turn, with_for_update=True)
    if turn.status not in ("done", "failed"):
        raise TurnNotFinished(turn.status)
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
