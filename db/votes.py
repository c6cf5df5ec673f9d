"""Vote mode's rows: the channel's mode, rounds, proposals and ballots. The rules below are
applied by service.voting (its refusals and its decisions: who may propose, when a round is
void, which proposal wins); this module reads, locks and writes what they need.

The rules:
- An admin turns the mode on per channel, with the round length (`set_mode`). While it is on,
  players cannot /act directly (`service.refusals.require_direct_play`).
- A round opens with the first proposal (or `open_round`), for `round_seconds`. Any member may
  propose one action per round (the /act fields, validated like /act) and vote once per round;
  voting again moves the vote.
- A round is due when its deadline has passed, or when every joined player has voted. Its
  deadline is stored in Postgres, so a restarted bot or page closes it on time (`due_rounds`).
- The winner has the most votes; a tie goes to the earliest proposal among the tied (also
  when nobody voted: the first proposal wins). It becomes a turn through `service.turn_queue.queue_turn`, credited
  to its proposer, who need not have joined. The author's cooldown does not apply (the round's
  length paces the channel); the backlog cap does: with the backlog full the round stays open
  and closes at the first check with a free slot.
- A round with no proposals closes without a turn. A round whose game is paused, reset or
  ended (or whose channel left vote mode) is void: no turn.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from db import notify
from db.bounds import name_text
from db.models import GameSession, Player, Turn, VoteBallot, VoteChannel, VoteProposal, VoteRound
from db.sessions import players as live_players
from db.sessions import touch
from db.turns import instruction_columns
from game.instruction import Instruction
from game.stored_reasons import VOIDED_MODE

DEFAULT_ROUND_SECONDS = 120

@dataclass(frozen=True)
class VoteConfig:
    enabled: bool
    round_seconds: int


@dataclass(frozen=True)
class RoundRows:
    """A round as stored, for a face's view of it (service.voting.RoundView): its row, its
    proposals in order, the votes per proposal and who voted for which, the joined players, and
    the number of the turn it became."""

    round: VoteRound
    proposals: list[VoteProposal]
    counts: dict[int, int]  # proposal id -> votes
    ballots: dict[int, int]  # voter id -> proposal id
    players: list[int]  # the joined players' ids
    turn_seq: int | None


# --- the mode


async def vote_config(s: AsyncSession, channel_id: int) -> VoteConfig:
    row = await s.get(VoteChannel, channel_id)
    if row is None:
        return VoteConfig(False, DEFAULT_ROUND_SECONDS)
    return VoteConfig(row.enabled, row.round_seconds)


async def set_mode(
    s: AsyncSession, guild_id: int, channel_id: int, enabled: bool, round_seconds: int | None = None
) -> tuple[VoteConfig, list[VoteRound]]:
    """Turn the channel's vote mode on or off (and set the round length, checked by the service).
    Turning it off voids the open round. Returns the new config and the rounds voided."""
    values = {"guild_id": guild_id, "enabled": enabled}
    if round_seconds is not None:
        values["round_seconds"] = round_seconds
    stmt = insert(VoteChannel).values(channel_id=channel_id, **values)
    await s.execute(stmt.on_conflict_do_update(index_elements=["channel_id"], set_={**values, "updated_at": func.now()}))
    voided: list[VoteRound] = []
    if not enabled:
        q = select(VoteRound).where(VoteRound.channel_id == channel_id, VoteRound.status == "open").with_for_update()
        for rnd in (await s.scalars(q)).all():
            await finish(s, rnd, "void", VOIDED_MODE)
            voided.append(rnd)
    return await vote_config(s, channel_id), voided


# --- rounds, proposals, ballots


def shot_characters(own: str | None, others: list[str]) -> list[str]:
    """Who is in a proposed shot, as with /act: the proposer's character (if they joined) and the
    others named. A member without a character names at least one (build_instruction says so)."""
    return ([own] if own else []) + [c for c in others if c != own]


async def open_round_of(s: AsyncSession, session_id: int, *, lock: bool = False) -> VoteRound | None:
    q = select(VoteRound).where(VoteRound.session_id == session_id, VoteRound.status == "open")
    if lock:
        q = q.with_for_update()
    return (await s.scalars(q)).first()


async def open_round(s: AsyncSession, gs: GameSession, by: int | None, round_seconds: int) -> tuple[VoteRound, bool]:
    """The session's open round, locked, or a new one (True) lasting `round_seconds`."""
    rnd = await open_round_of(s, gs.id, lock=True)
    if rnd is not None:
        return rnd, False
    now = (await s.execute(select(func.now()))).scalar_one()
    stmt = (
        insert(VoteRound)
        .values(
            session_id=gs.id,
            guild_id=gs.guild_id,
            channel_id=gs.channel_id,
            opened_by=by,
            opened_at=now,
            deadline=now + timedelta(seconds=round_seconds),
        )
        # A concurrent proposal may open it first: then this one joins that round.
        .on_conflict_do_nothing(index_elements=["session_id"], index_where=text("status = 'open'"))
        .returning(VoteRound.id)
    )
    new_id = await s.scalar(stmt)
    rnd = await open_round_of(s, gs.id, lock=True)
    if rnd is None:  # pragma: no cover - it closed between the two statements
        raise LookupError(f"the open round of session {gs.id} closed while it was opened")
    if new_id is None:
        return rnd, False
    await _changed(s, rnd)
    return rnd, True


async def add_proposal(s: AsyncSession, rnd: VoteRound, *, author_id: int, author_name: str,
                       instruction: Instruction) -> None:
    """A member's proposal in the open round `rnd` (locked and checked by the caller)."""
    s.add(
        VoteProposal(
            round_id=rnd.id,
            author_id=author_id,
            author_name=name_text(author_name),
            character_names=list(instruction.characters),
            **instruction_columns(instruction),
        )
    )
    await s.flush()
    await touch(s, rnd.session_id)  # a lively vote is activity: the idle pause leaves the game alone
    await _changed(s, rnd)


async def proposal(s: AsyncSession, proposal_id: int) -> VoteProposal | None:
    return await s.get(VoteProposal, proposal_id)


async def lock_round(s: AsyncSession, round_id: int) -> VoteRound | None:
    """The round, its row locked until the transaction ends."""
    return await s.get(VoteRound, round_id, with_for_update=True)


async def cast_ballot(s: AsyncSession, rnd: VoteRound, proposal_id: int, voter_id: int) -> None:
    """The voter's ballot in `rnd` (locked and checked by the caller); a second one replaces the first."""
    stmt = insert(VoteBallot).values(round_id=rnd.id, voter_id=voter_id, proposal_id=proposal_id)
    await s.execute(
        stmt.on_conflict_do_update(index_elements=["round_id", "voter_id"], set_={"proposal_id": proposal_id, "voted_at": func.now()})
    )
    await touch(s, rnd.session_id)
    await _changed(s, rnd)


async def options(s: AsyncSession, round_id: int) -> list[VoteProposal]:
    """The round's proposals in order: option n is the n-th."""
    q = select(VoteProposal).where(VoteProposal.round_id == round_id).order_by(VoteProposal.id)
    return list((await s.scalars(q)).all())


async def round_rows(s: AsyncSession, round_id: int) -> RoundRows:
    """Round `round_id` with its proposals, votes and players, as read now."""
    rnd = await s.get(VoteRound, round_id)
    if rnd is None:  # ids come from existing rounds, which are never deleted
        raise LookupError(f"vote round {round_id} does not exist")
    await s.refresh(rnd)
    counts = dict(
        (await s.execute(
            select(VoteBallot.proposal_id, func.count()).where(VoteBallot.round_id == round_id).group_by(VoteBallot.proposal_id)
        )).all()
    )
    ballots = dict((await s.execute(select(VoteBallot.voter_id, VoteBallot.proposal_id).where(VoteBallot.round_id == round_id))).all())
    return RoundRows(
        round=rnd,
        proposals=await options(s, round_id),
        counts=counts,
        ballots=ballots,
        players=[p.user_id for p in await live_players(s, rnd.session_id)],
        turn_seq=None if rnd.turn_id is None else await s.scalar(select(Turn.seq).where(Turn.id == rnd.turn_id)),
    )


def proposed_instruction(p: VoteProposal) -> Instruction:
    """A proposal's instruction, as it was built when proposed."""
    return Instruction(characters=tuple(p.character_names), character_ids=tuple(p.characters), motion=p.motion,
                       adverb=p.adverb, background=p.background, time_of_day=p.time_of_day)


# --- closing


async def due_rounds(s: AsyncSession, guild_ids: Collection[int] | None = None) -> list[int]:
    """Open rounds to close now: past their deadline, every joined player has voted, or their
    game is no longer active."""
    players = select(func.count()).select_from(Player).where(
        Player.session_id == VoteRound.session_id, Player.left_at.is_(None)
    ).scalar_subquery()
    voted = (
        select(func.count())
        .select_from(Player)
        .join(VoteBallot, and_(VoteBallot.voter_id == Player.user_id, VoteBallot.round_id == VoteRound.id))
        .where(Player.session_id == VoteRound.session_id, Player.left_at.is_(None))
        .scalar_subquery()
    )
    q = (
        select(VoteRound.id)
        .join(GameSession, GameSession.id == VoteRound.session_id)
        .where(VoteRound.status == "open")
        .where((VoteRound.deadline <= func.now()) | (GameSession.status != "active") | ((players > 0) & (voted >= players)))
        .order_by(VoteRound.deadline)
    )
    if guild_ids is not None:
        q = q.where(VoteRound.guild_id.in_(list(guild_ids)))
    return list((await s.scalars(q)).all())


async def lock_due_round(s: AsyncSession, round_id: int) -> VoteRound | None:
    """Round `round_id`, locked, if it is open and due; None if another closer holds it, or it is
    closed or not due."""
    rnd = (await s.scalars(select(VoteRound).where(VoteRound.id == round_id).with_for_update(skip_locked=True))).first()
    if rnd is None or rnd.status != "open" or round_id not in await due_rounds(s, [rnd.guild_id]):
        return None
    return rnd


async def won(s: AsyncSession, rnd: VoteRound, proposal_id: int, turn_id: int, outcome: str) -> None:
    """The round closed: proposal `proposal_id` won and became turn `turn_id`."""
    rnd.winner_id, rnd.turn_id = proposal_id, turn_id
    await finish(s, rnd, "closed", outcome)


async def unshown(s: AsyncSession, guild_ids: Collection[int]) -> list[VoteRound]:
    """Finished rounds whose result is not shown on their message yet (a restart in between)."""
    q = (
        select(VoteRound)
        .where(VoteRound.status != "open", VoteRound.result_shown_at.is_(None), VoteRound.guild_id.in_(list(guild_ids)))
        .order_by(VoteRound.id)
    )
    return list((await s.scalars(q)).all())


async def mark_shown(s: AsyncSession, round_id: int) -> None:
    await s.execute(update(VoteRound).where(VoteRound.id == round_id).values(result_shown_at=func.now()))


async def set_message(s: AsyncSession, round_id: int, message_id: int) -> None:
    await s.execute(update(VoteRound).where(VoteRound.id == round_id).values(message_id=message_id))


async def latest_round(s: AsyncSession, session_id: int) -> VoteRound | None:
    q = select(VoteRound).where(VoteRound.session_id == session_id).order_by(VoteRound.id.desc()).limit(1)
    return (await s.scalars(q)).first()


async def finish(s: AsyncSession, rnd: VoteRound, status: str, outcome: str) -> None:
    """Close the round; `outcome`: its code (game.stored_reasons), rendered where it is shown."""
    rnd.status = status
    rnd.outcome = outcome
    rnd.closed_at = func.now()
    await s.flush()
    await s.refresh(rnd)
    await _changed(s, rnd)


async def _changed(s: AsyncSession, rnd: VoteRound) -> None:
    await notify.notify(s, notify.SESSION_CHANGED, session_id=rnd.session_id, channel_id=rnd.channel_id, event="vote", round_id=rnd.id)
