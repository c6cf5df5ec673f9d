"""Taking shots down: the one primitive that removes a turn's content, shared by moderation
(/mod remove, the "Remove shot" menu) and members' privacy requests.

A removed turn keeps its row and its number (the channel's order and the later turns' numbers
stay as they were) but loses everything a member wrote or the model made of it: the clip, the
representation (the next turns' context), the instruction and its parts. Character states are
NOT rewound: later turns were generated from them. Everything that reads turns skips removed
ones (db.turn_reads, the worker's context in db.turn_results, the play page).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db import notify
from db.bounds import REASON_LEN, fits_bigint, free_text, name_text, require_id
from db.models import PENDING_TURN_STATUSES, GameSession, Turn, VoteProposal, VoteRound

# Why a shot was taken down: codes (game.stored_reasons), rendered where shown. REMOVED is also
# the cancel code of a queued turn taken down.
from game.stored_reasons import REMOVAL_CODES, REMOVED, REMOVER_WORDS

# What a removed turn's text columns hold instead of the member's words.
REMOVED_TEXT = ""


async def take_down_turns(
    s: AsyncSession,
    turn_ids: Sequence[int],
    *,
    by_id: int | None,
    by_name: str | None,
    note: str | None = None,
    reason: str = REMOVED,
) -> list[int]:
    """Remove these turns' content in the caller's transaction; the ids actually changed.
    `note`: the remover's own words (stored apart, code REMOVER_WORDS); without them `reason`, a
    removal code (game.stored_reasons), says why.

    Idempotent: a turn already removed, or an id that is no turn, is left out of the result. A
    turn still queued or running is cancelled as well (its job then finds nothing to do, and a
    worker finishing it finds it no longer running, so no clip is written after the removal).
    The vote proposal a removed turn came from loses its text too, and its round's message is
    shown again without it. One NOTIFY per session
    (SESSION_CHANGED, event "removed") tells listeners (the play page) to re-read."""
    ids = sorted({i for i in turn_ids if fits_bigint(i)})
    if not ids:
        return []
    if by_id is not None:
        require_id(by_id, "user id")
    if reason not in REMOVAL_CODES:
        raise ValueError(f"unknown removal reason code {reason!r}")
    words = free_text(note, REASON_LEN)
    rows = await _lock_live_turns(s, ids)
    if not rows:
        return []
    changed = [r.id for r in rows]
    pending = {r.id for r in rows if r.status in PENDING_TURN_STATUSES}
    await _clear_turns(
        s, changed, pending,
        why=REMOVER_WORDS if words else reason,
        words=words,
        by_id=by_id,
        who=None if by_name is None else name_text(by_name),
    )
    await _clear_proposals(s, changed)
    await _tell_listeners(s, rows, pending)
    return changed


async def _lock_live_turns(s: AsyncSession, ids: list[int]) -> Sequence[Row[int, int, str]]:
    """The turns among `ids` not removed yet, locked for this transaction, in id order."""
    found = await s.execute(
        select(Turn.id, Turn.session_id, Turn.status)
        .where(Turn.id.in_(ids), Turn.removed_at.is_(None))
        .order_by(Turn.id)
        .with_for_update()
    )
    return found.all()


async def _clear_turns(
    s: AsyncSession,
    changed: list[int],
    pending: set[int],
    *,
    why: str,
    words: str | None,
    by_id: int | None,
    who: str | None,
) -> None:
    """Empty the turns' content and record who removed them and why; cancel the pending ones."""
    await s.execute(
        update(Turn)
        .where(Turn.id.in_(changed))
        .values(
            mp4=None,
            mp4_size=None,
            representation=None,
            instruction=REMOVED_TEXT,
            motion=REMOVED_TEXT,
            adverb=REMOVED_TEXT,
            background=REMOVED_TEXT,
            time_of_day=REMOVED_TEXT,
            removed_at=func.now(),
            removed_reason=why,
            removed_note=words,
            removed_by_id=by_id,
            removed_by_name=who,
        )
    )
    if pending:
        await s.execute(
            update(Turn)
            .where(Turn.id.in_(sorted(pending)))
            .values(status="cancelled", error=REMOVED, finished_at=func.now())
        )


async def _clear_proposals(s: AsyncSession, changed: list[int]) -> None:
    """The winning vote proposals the turns came from lose their text too."""
    proposals = select(VoteRound.winner_id).where(VoteRound.turn_id.in_(changed), VoteRound.winner_id.is_not(None))
    # Its round's message shows the result again (bot.answers.cogs.vote), now without the text.
    await s.execute(update(VoteRound).where(VoteRound.turn_id.in_(changed)).values(result_shown_at=None))
    await s.execute(
        update(VoteProposal)
        .where(VoteProposal.id.in_(proposals))
        .values(instruction=REMOVED_TEXT, motion=REMOVED_TEXT, adverb=REMOVED_TEXT,
                background=REMOVED_TEXT, time_of_day=REMOVED_TEXT)
    )


async def _tell_listeners(s: AsyncSession, rows: Sequence[Row[int, int, str]], pending: set[int]) -> None:
    """A TURN_QUEUED per cancelled turn, one SESSION_CHANGED ("removed") per session."""
    sessions = {r.session_id for r in rows}
    found = await s.execute(select(GameSession.id, GameSession.channel_id).where(GameSession.id.in_(sessions)))
    channels = {r.id: r.channel_id for r in found.all()}
    for r in rows:
        if r.id in pending:  # as a cancel does: the channel's status messages and positions refresh
            await notify.notify(s, notify.TURN_QUEUED, turn_id=r.id, session_id=r.session_id, channel_id=channels[r.session_id])
    for sid, channel_id in channels.items():
        await notify.notify(s, notify.SESSION_CHANGED, session_id=sid, channel_id=channel_id, event="removed")
