"""Turns: submission, the worker's start/progress/complete/fail, posting, cancel, regenerate.

Each function that must be atomic does its work in the caller's transaction (the caller commits
once): a turn row and its queue job are inserted together; a result, the new character states
and the NOTIFY are written together.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased, undefer

from contracts import representation
from contracts.turn import HistoryTurn, TurnRequest, TurnResult
from db import notify
from db.bounds import ERROR_LEN, REASON_LEN, STAGE_LEN, fits_bigint, fits_int, free_text, name_text, require_id
from db.dml import rowcount
from db.guilds import Limits
from db.models import PENDING_TURN_STATUSES, CharacterStateRow, GameSession, Turn, VoteChannel
from db.sessions import ensure_states, player_of, session_by_id, states, touch
from game import states as rules
from game.catalogue import session_film
from game.errors import (
    BacklogFull,
    Cooldown,
    NoSession,
    NotJoined,
    NoTurnToRegenerate,
    SessionPaused,
    TurnNotCancellable,
    TurnNotFinished,
    TurnNotFound,
    VoteModeOn,
)
from game.instruction import Instruction

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
        raise SessionPaused(gs.paused_reason)
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


async def get_turn(s: AsyncSession, turn_id: int, *, blobs: bool = False, lock: bool = False) -> Turn | None:
    if not fits_bigint(turn_id):
        return None
    q = select(Turn).where(Turn.id == turn_id)
    if blobs:
        q = q.options(undefer(Turn.mp4), undefer(Turn.representation))
    if lock:
        q = q.with_for_update()
    return (await s.scalars(q)).first()


async def turn_by_seq(s: AsyncSession, session_id: int, seq: int) -> Turn:
    if not fits_int(seq):
        raise TurnNotFound(seq)
    t = (await s.scalars(select(Turn).where(Turn.session_id == session_id, Turn.seq == seq))).first()
    if t is None:
        raise TurnNotFound(seq)
    return t


async def pending_turns(s: AsyncSession, session_id: int) -> list[Turn]:
    q = select(Turn).where(Turn.session_id == session_id, Turn.status.in_(PENDING_TURN_STATUSES)).order_by(Turn.seq)
    return list((await s.scalars(q)).all())


async def history(s: AsyncSession, session_id: int, count: int = 10, *, blobs: bool = False) -> list[Turn]:
    """The latest `count` turns of a session, oldest first."""
    q = select(Turn).where(Turn.session_id == session_id).order_by(Turn.seq.desc()).limit(count)
    if blobs:
        q = q.options(undefer(Turn.mp4))
    return list(reversed((await s.scalars(q)).all()))


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
        .where(Turn.session_id == session_id, Turn.status == "done", Turn.mp4_size.is_not(None), Turn.blobs_pruned_at.is_(None))
        .order_by(Turn.seq.desc())
        .limit(count)
    )
    return [Shot(*row) for row in reversed((await s.execute(q)).all())]


async def clip_bytes(s: AsyncSession, turn_id: int) -> bytes | None:
    """One turn's MP4 (None once pruned)."""
    return await s.scalar(select(Turn.mp4).where(Turn.id == turn_id))


async def session_of(s: AsyncSession, turn: Turn) -> GameSession:
    return await session_by_id(s, turn.session_id)


def stored_prediction(turn: Turn) -> rules.Prediction:
    """The prediction a done turn stored (complete_turn writes the four values together)."""
    m, social, ent, stamina = turn.motion_level, turn.delta_social, turn.delta_entertainment, turn.delta_stamina
    if m is None or social is None or ent is None or stamina is None:
        raise ValueError(f"turn {turn.id} ({turn.status}) has no stored prediction")
    return rules.Prediction(m, social, ent, stamina)


# --- the worker's side


async def start_turn(s: AsyncSession, turn_id: int, history_window: int) -> TurnRequest | None:
    """Mark a turn running and build what the backend needs. None: nothing to do (the turn is
    cancelled, already finished, or gone), which makes a job delivered twice harmless."""
    turn = await get_turn(s, turn_id, lock=True)
    if turn is None or turn.status not in PENDING_TURN_STATUSES:
        return None
    gs = await session_by_id(s, turn.session_id)
    turn.status = "running"
    turn.started_at = func.now()
    turn.attempts += 1
    turn.error = None
    await s.flush()

    film = session_film(gs.film_id)
    names = {c.id: c.name for c in film.characters}
    # Context: the last good turns before this one (failed and cancelled ones are skipped).
    hist: list[HistoryTurn] = []
    if history_window > 0:
        q = (
            select(Turn)
            .where(Turn.session_id == turn.session_id, Turn.seq < turn.seq, Turn.status == "done")
            .order_by(Turn.seq.desc())
            .limit(history_window)
            .options(undefer(Turn.representation))
        )
        for h in reversed((await s.scalars(q)).all()):
            hist.append(
                HistoryTurn(
                    instruction=h.instruction,
                    prediction=stored_prediction(h),
                    representation=None if h.representation is None else representation.decode(h.representation),
                )
            )
    current = await states(s, turn.session_id)
    return TurnRequest(
        turn_id=turn.id,
        session_id=turn.session_id,
        film_id=gs.film_id,
        instruction=turn.instruction,
        characters=tuple(names.get(c, c) for c in turn.characters),
        motion=turn.motion,
        adverb=turn.adverb,
        background=turn.background,
        time_of_day=turn.time_of_day,
        seed=turn.seed,
        states_before={names.get(c, c): current.get(c, rules.CharacterState()) for c in turn.characters},
        history=tuple(hist),
    )


async def record_progress(s: AsyncSession, turn_id: int, fraction: float, stage: str) -> None:
    fraction = max(0.0, min(1.0, fraction))
    stage = free_text(stage, STAGE_LEN) or ""
    row = (
        await s.execute(
            update(Turn)
            .where(Turn.id == turn_id, Turn.status == "running")
            .values(progress=fraction, progress_stage=stage)
            .returning(Turn.session_id)
        )
    ).first()
    if row is not None:
        gs = await session_by_id(s, row.session_id)
        await notify.notify(
            s, notify.TURN_PROGRESS, turn_id=turn_id, session_id=gs.id, channel_id=gs.channel_id, progress=fraction, stage=stage
        )


async def complete_turn(s: AsyncSession, turn_id: int, result: TurnResult, backend: str) -> bool:
    """Write a result and apply it to the characters, once. False if the turn was already
    finished (a second delivery of the same job) or cancelled meanwhile."""
    turn = await get_turn(s, turn_id, lock=True)
    if turn is None or turn.status != "running":
        return False
    gs = await session_by_id(s, turn.session_id)
    current = await states(s, turn.session_id, lock=True)
    before, after = {}, {}
    for cid in turn.characters:
        old = current.get(cid, rules.CharacterState())
        new = rules.apply(old, result.prediction)
        before[cid], after[cid] = old.as_dict(), new.as_dict()
        await s.execute(
            update(CharacterStateRow)
            .where(CharacterStateRow.session_id == turn.session_id, CharacterStateRow.character_id == cid)
            .values(**new.as_dict(), updated_at=func.now())
        )
    p = result.prediction
    turn.status = "done"
    turn.progress = 1.0
    turn.progress_stage = "done"
    turn.motion_level, turn.delta_social = p.motion_level, p.social
    turn.delta_entertainment, turn.delta_stamina = p.entertainment, p.stamina
    turn.motion_scope = result.motion_scope
    turn.states_before, turn.states_after = before, after
    turn.backend = backend
    turn.is_preview = result.is_preview
    turn.representation = None if result.representation is None else representation.encode(result.representation)
    turn.mp4 = result.mp4
    turn.mp4_size = None if result.mp4 is None else len(result.mp4)
    turn.clip_seconds = None if result.mp4 is None else result.clip_seconds
    turn.timings = {k: round(float(v), 4) for k, v in result.timings.items()}
    turn.finished_at = func.now()
    await s.flush()
    await notify.notify(s, notify.TURN_FINISHED, turn_id=turn.id, session_id=gs.id, channel_id=gs.channel_id, status="done")
    return True


async def fail_turn(s: AsyncSession, turn_id: int, error: str) -> bool:
    turn = await get_turn(s, turn_id, lock=True)
    if turn is None or turn.status not in PENDING_TURN_STATUSES:
        return False
    gs = await session_by_id(s, turn.session_id)
    turn.status = "failed"
    turn.error = free_text(error, ERROR_LEN) or "failed"
    turn.finished_at = func.now()
    await s.flush()
    await notify.notify(s, notify.TURN_FINISHED, turn_id=turn.id, session_id=gs.id, channel_id=gs.channel_id, status="failed")
    return True


async def requeue_turn(s: AsyncSession, turn_id: int) -> bool:
    """Put a running turn back to queued (its worker stopped before finishing)."""
    return bool(await rowcount(
        s, update(Turn).where(Turn.id == turn_id, Turn.status == "running").values(status="queued", progress=0, progress_stage=None)
    ))


# --- moderation and players' buttons


async def cancel_turn(s: AsyncSession, turn: Turn, reason: str = "cancelled") -> Turn:
    await s.refresh(turn, with_for_update=True)
    if turn.status != "queued":
        raise TurnNotCancellable(turn.status)
    turn.status = "cancelled"
    turn.error = free_text(reason, REASON_LEN) or "cancelled"
    turn.finished_at = func.now()
    await s.flush()
    gs = await session_by_id(s, turn.session_id)
    await notify.notify(s, notify.TURN_QUEUED, turn_id=turn.id, session_id=gs.id, channel_id=gs.channel_id)
    return turn


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


async def regenerate_latest(s: AsyncSession, gs: GameSession, enqueue: Enqueue | None) -> Turn:
    """Generate the session's latest finished turn again with a new seed: its effect on the
    characters is undone, and it is queued again under the same number."""
    await s.refresh(gs, with_for_update=True)
    if gs.status == "paused":
        raise SessionPaused(gs.paused_reason)
    turn = await latest_turn(s, gs.id)
    if turn is None:
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


# --- posting (the bot's notifier and the play page)


# How long a posting claim holds. Posting is an idempotent edit of the turn's status message
# (its id is recorded before the turn runs), so a claim left by a crash or a database blip
# mid-post can expire soon: the next sweep repeats the same edit, and the status message stops
# saying "generating" within about this long.
POST_LEASE = timedelta(seconds=30)


async def claim_unposted(
    s: AsyncSession,
    claimant: str,
    lease: timedelta = timedelta(minutes=2),
    limit: int = 20,
    guild_ids: Collection[int] | None = None,
) -> list[Turn]:
    """Claim finished, unposted turns for posting (a claim expires after `lease`, so a poster
    that died mid-post does not block a turn forever). Oldest first. `guild_ids`, when given,
    limits the claim to sessions of those guilds (a poster claims only what it can post).

    A turn waiting for its next try (`post_retry_at`) is not claimed, nor is any later turn of its
    session while it waits: a channel gets its turns in order."""
    earlier = aliased(Turn)
    earlier_unposted = select(earlier.id).where(
        earlier.session_id == Turn.session_id,
        earlier.seq < Turn.seq,
        earlier.status.in_(("done", "failed")),
        earlier.posted_at.is_(None),
    )
    conditions = [
        Turn.status.in_(("done", "failed")),
        Turn.posted_at.is_(None),
        or_(Turn.post_claimed_at.is_(None), Turn.post_claimed_at < func.now() - lease),
        or_(Turn.post_retry_at.is_(None), Turn.post_retry_at <= func.now()),
        ~earlier_unposted.exists(),
    ]
    if guild_ids is not None:
        in_guilds = select(GameSession.id).where(GameSession.guild_id.in_(list(guild_ids)))
        conditions.append(Turn.session_id.in_(in_guilds.scalar_subquery()))
    sub = (
        select(Turn.id)
        .where(*conditions)
        .order_by(Turn.finished_at, Turn.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    q = (
        update(Turn)
        .where(Turn.id.in_(sub.scalar_subquery()))
        .values(post_claimed_at=func.now(), post_claimed_by=claimant[:64])
        .returning(Turn)
    )
    rows = list((await s.scalars(q)).all())
    return sorted(rows, key=lambda t: (t.session_id, t.seq))


async def mark_posted(s: AsyncSession, turn_id: int, message_id: int | None, error: str | None = None) -> None:
    """The turn is done with: in `message_id`, or (None) not in Discord, `error` saying why."""
    await s.execute(
        update(Turn)
        # Only a finished turn: one regenerated meanwhile (queued again) is posted afresh later.
        .where(Turn.id == turn_id, Turn.status.in_(("done", "failed")))
        .values(posted_message_id=message_id, posted_at=func.now(), post_retry_at=None, post_error=error and error[:2000])
    )


async def postpone_post(s: AsyncSession, turn_id: int, delay: timedelta, error: str) -> int:
    """A try failed: release the claim, count the try, and wait `delay` before the next one.
    Returns the tries so far."""
    return (
        await s.execute(
            update(Turn)
            .where(Turn.id == turn_id, Turn.posted_at.is_(None))
            .values(
                post_claimed_at=None,
                post_claimed_by=None,
                post_attempts=Turn.post_attempts + 1,
                post_retry_at=func.now() + delay,
                post_error=error[:2000],
            )
            .returning(Turn.post_attempts)
        )
    ).scalar() or 0


async def release_claim(s: AsyncSession, turn_id: int) -> None:
    await s.execute(update(Turn).where(Turn.id == turn_id, Turn.posted_at.is_(None)).values(post_claimed_at=None, post_claimed_by=None))


async def next_post_retry(s: AsyncSession, guild_ids: Collection[int]) -> datetime | None:
    """When the earliest postponed turn of these guilds may be tried again (a time to come: one
    already due was just claimed, or another poster holds it)."""
    in_guilds = select(GameSession.id).where(GameSession.guild_id.in_(list(guild_ids)))
    return await s.scalar(
        select(func.min(Turn.post_retry_at)).where(
            Turn.posted_at.is_(None), Turn.post_retry_at > func.now(), Turn.session_id.in_(in_guilds.scalar_subquery())
        )
    )


async def queued_with_status_message(s: AsyncSession, guild_ids: list[int]) -> list[tuple[Turn, int, int]]:
    """Queued turns of these guilds that have a status message, with their channel and message ids."""
    q = (
        select(Turn, GameSession.channel_id, Turn.status_message_id)
        .join(GameSession, GameSession.id == Turn.session_id)
        .where(Turn.status == "queued", Turn.status_message_id.is_not(None), GameSession.guild_id.in_(guild_ids))
        .order_by(Turn.id)
    )
    return [(t, ch, message_id) for t, ch, message_id in (await s.execute(q)).all() if message_id is not None]


async def set_status_message(s: AsyncSession, turn_id: int, message_id: int) -> None:
    await s.execute(update(Turn).where(Turn.id == turn_id).values(status_message_id=message_id))


# --- maintenance


async def prune_blobs(s: AsyncSession, older_than: timedelta) -> int:
    """Drop MP4s and representations of posted turns older than `older_than` (the latest turns
    of each session keep their representation: they are the next turn's context)."""
    cutoff = datetime.now(UTC) - older_than
    newer = aliased(Turn)
    keep_from = select(func.max(newer.seq) - 5).where(newer.session_id == Turn.session_id).scalar_subquery()
    return await rowcount(
        s,
        update(Turn)
        .where(
            Turn.finished_at < cutoff,
            Turn.blobs_pruned_at.is_(None),
            Turn.status.in_(("done", "failed", "cancelled")),
            or_(Turn.posted_at.is_not(None), Turn.status == "cancelled"),
            Turn.seq < keep_from,
        )
        .values(mp4=None, representation=None, blobs_pruned_at=func.now()),
    )
