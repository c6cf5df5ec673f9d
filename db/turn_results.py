"""The worker's side of a turn: start it (and build what the backend needs), record its progress,
write its result or its failure, or put it back in the queue.

Each function does its work in the caller's transaction: a result, the new character states and
the NOTIFY are written together; a job delivered twice finds the turn already finished and does
nothing.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import undefer

from contracts import representation
from contracts.turn import HistoryTurn, TurnRequest, TurnResult
from db import notify, shares
from db.bounds import ERROR_LEN, STAGE_LEN, free_text
from db.dml import rowcount
from db.models import PENDING_TURN_STATUSES, CharacterStateRow, Turn
from db.sessions import session_by_id, states
from db.turn_reads import get_turn, stored_prediction
from game import states as rules
from game.catalogue import session_film


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
    # Context: the last good turns before this one (failed, cancelled and removed ones are skipped).
    hist: list[HistoryTurn] = []
    if history_window > 0:
        q = (
            select(Turn)
            .where(Turn.session_id == turn.session_id, Turn.seq < turn.seq, Turn.status == "done", Turn.removed_at.is_(None))
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


async def record_progress(s: AsyncSession, turn_id: int, fraction: float, stage: str,
                          preview: tuple[int, bytes] | None = None) -> None:
    """Store a running turn's progress, and with it a new preview (its number in the turn, the
    still: db.turn_previews); the NOTIFY says the preview's number, listeners read the still."""
    fraction = max(0.0, min(1.0, fraction))
    stage = free_text(stage, STAGE_LEN) or ""
    values: dict = {"progress": fraction, "progress_stage": stage}
    if preview is not None:
        values.update(preview_no=preview[0], preview=preview[1])
    row = (
        await s.execute(
            update(Turn).where(Turn.id == turn_id, Turn.status == "running").values(**values).returning(Turn.session_id)
        )
    ).first()
    if row is not None:
        gs = await session_by_id(s, row.session_id)
        extra = {} if preview is None else {"preview": preview[0]}
        await notify.notify(
            s, notify.TURN_PROGRESS, turn_id=turn_id, session_id=gs.id, channel_id=gs.channel_id, progress=fraction, stage=stage,
            **extra,
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
    turn.preview = turn.preview_no = None  # the clip replaces its preview
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
    if turn.started_at is not None:
        await shares.record_usage(s, gs.guild_id, turn.started_at)
    turn.finished_at = func.now()
    await s.flush()
    await notify.notify(s, notify.TURN_FINISHED, turn_id=turn.id, session_id=gs.id, channel_id=gs.channel_id, status="done")
    return True


async def fail_turn(s: AsyncSession, turn_id: int, error: str) -> bool:
    turn = await get_turn(s, turn_id, lock=True)
    if turn is None or turn.status not in PENDING_TURN_STATUSES:
        return False
    gs = await session_by_id(s, turn.session_id)
    if turn.status == "running" and turn.started_at is not None:  # it took GPU time
        await shares.record_usage(s, gs.guild_id, turn.started_at)
    turn.status = "failed"
    turn.error = free_text(error, ERROR_LEN) or "failed"
    turn.preview = turn.preview_no = None
    turn.finished_at = func.now()
    await s.flush()
    await notify.notify(s, notify.TURN_FINISHED, turn_id=turn.id, session_id=gs.id, channel_id=gs.channel_id, status="failed")
    return True


async def requeue_turn(s: AsyncSession, turn_id: int) -> bool:
    """Put a running turn back to queued (its worker stopped before finishing)."""
    return bool(await rowcount(
        s, update(Turn).where(Turn.id == turn_id, Turn.status == "running").values(status="queued", progress=0, progress_stage=None,
                                                                                   preview=None, preview_no=None)
    ))
