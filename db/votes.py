"""Vote mode: a channel where members propose actions and vote, and each round's winner becomes
the turn. Used by both faces (the bot's /vote and the play page).

Rules, in one place:
- An admin turns the mode on per channel, with the round length (`set_mode`). While it is on,
  players cannot /act directly (`db.turns.require_direct_play`).
- A round opens with the first proposal (or `open_round`), for `round_seconds`. Any member may
  propose one action per round (the /act fields, validated like /act) and vote once per round;
  voting again moves the vote.
- A round is due when its deadline has passed, or when every joined player has voted. Its
  deadline is stored in Postgres, so a restarted bot or page closes it on time (`due_rounds`).
- The winner has the most votes; a tie goes to the earliest proposal among the tied (also
  when nobody voted: the first proposal wins). It becomes a turn through `submit_turn`, credited
  to its proposer, who need not have joined. The author's cooldown does not apply (the round's
  length paces the channel); the backlog cap does: with the backlog full the round stays open
  and closes at the first check with a free slot.
- A round with no proposals closes without a turn. A round whose game is paused, reset or
  ended (or whose channel left vote mode) is void: no turn.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from db import notify
from db.bounds import name_text
from db.guilds import channel_config
from db.models import GameSession, Player, Turn, VoteBallot, VoteChannel, VoteProposal, VoteRound
from db.sessions import players as live_players
from db.sessions import session_by_id, touch
from db.turns import Enqueue, instruction_columns, submit_turn
from game.errors import GameError
from game.instruction import Instruction
from game.session_errors import SessionPaused
from game.stored_reasons import NO_PROPOSALS, ROUND_WON, VOIDED_END, VOIDED_MODE, VOIDED_PAUSE, round_outcome
from game.texts import Later
from game.turn_errors import AlreadyProposed, BacklogFull, NoOpenRound, RoundFull, UnknownProposal, VoteModeOff
from i18n import L_, ngettext
from i18n.formatting import number as format_number
from settings import Settings

MAX_PROPOSALS = 20  # a round's message carries one button per proposal (Discord allows 25)
DEFAULT_ROUND_SECONDS = 120
MIN_ROUND_SECONDS, MAX_ROUND_SECONDS = 10, 24 * 3600

@dataclass(frozen=True)
class VoteConfig:
    enabled: bool
    round_seconds: int


@dataclass
class Option:
    number: int  # 1-based, in proposal order: what members see and vote for
    proposal: VoteProposal
    votes: int


@dataclass
class RoundView:
    """Everything a face shows of a round."""

    round: VoteRound
    options: list[Option]
    voters: int
    players: int
    players_voted: int
    winner: Option | None = None
    my_vote: int | None = None  # the asking member's option number
    turn_seq: int | None = None  # the number of the turn the round became

    def outcome_text(self) -> str:
        """The finished round's outcome in the current locale ("" while it is open). The row keeps
        a code (game.stored_reasons); a winner's line is worded from the round (votes do not change
        once it is closed)."""
        rnd = self.round
        w = self.winner
        if rnd.status == "closed" and w is not None and self.turn_seq is not None:
            tied = sum(1 for o in self.options if o.votes == w.votes)
            if tied > 1:
                return ngettext(
                    "Option %(number)s won with %(n)s vote, the earliest of %(tied)s tied options: it is turn #%(seq)s.",
                    "Option %(number)s won with %(n)s votes, the earliest of %(tied)s tied options: it is turn #%(seq)s.",
                    w.votes, number=w.number, tied=format_number(tied), seq=self.turn_seq,
                )
            return ngettext("Option %(number)s won with %(n)s vote: it is turn #%(seq)s.",
                            "Option %(number)s won with %(n)s votes: it is turn #%(seq)s.",
                            w.votes, number=w.number, seq=self.turn_seq)
        return str(round_outcome(rnd.outcome))


# --- the mode


async def vote_config(s: AsyncSession, channel_id: int) -> VoteConfig:
    row = await s.get(VoteChannel, channel_id)
    if row is None:
        return VoteConfig(False, DEFAULT_ROUND_SECONDS)
    return VoteConfig(row.enabled, row.round_seconds)


async def set_mode(
    s: AsyncSession, guild_id: int, channel_id: int, enabled: bool, round_seconds: int | None = None
) -> tuple[VoteConfig, list[VoteRound]]:
    """Turn the channel's vote mode on or off (and set the round length). Turning it off voids
    the open round. Returns the new config and the rounds voided."""
    if round_seconds is not None and not MIN_ROUND_SECONDS <= round_seconds <= MAX_ROUND_SECONDS:
        raise GameError(L_("A round lasts between %(low)s and %(high)s seconds.",
                            low=MIN_ROUND_SECONDS, high=Later(format_number, MAX_ROUND_SECONDS)))
    values = {"guild_id": guild_id, "enabled": enabled}
    if round_seconds is not None:
        values["round_seconds"] = round_seconds
    stmt = insert(VoteChannel).values(channel_id=channel_id, **values)
    await s.execute(stmt.on_conflict_do_update(index_elements=["channel_id"], set_={**values, "updated_at": func.now()}))
    voided: list[VoteRound] = []
    if not enabled:
        q = select(VoteRound).where(VoteRound.channel_id == channel_id, VoteRound.status == "open").with_for_update()
        for rnd in (await s.scalars(q)).all():
            await _finish(s, rnd, "void", VOIDED_MODE)
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


async def open_round(s: AsyncSession, gs: GameSession, by: int | None) -> tuple[VoteRound, bool]:
    """The session's open round, or a new one (True) lasting the channel's round length."""
    cfg = await vote_config(s, gs.channel_id)
    if not cfg.enabled:
        raise VoteModeOff()
    if gs.status == "paused":
        raise SessionPaused(gs.paused_reason, gs.paused_note)
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
            deadline=now + timedelta(seconds=cfg.round_seconds),
        )
        # A concurrent proposal may open it first: then this one joins that round.
        .on_conflict_do_nothing(index_elements=["session_id"], index_where=text("status = 'open'"))
        .returning(VoteRound.id)
    )
    new_id = await s.scalar(stmt)
    rnd = await open_round_of(s, gs.id, lock=True)
    if rnd is None:  # pragma: no cover - it closed between the two statements
        raise NoOpenRound()
    if new_id is None:
        return rnd, False
    await _changed(s, rnd)
    return rnd, True


async def propose(
    s: AsyncSession, gs: GameSession, *, author_id: int, author_name: str, instruction: Instruction
) -> tuple[VoteRound, int, bool]:
    """Add a member's proposal to the open round (opening one if needed). Returns the round,
    the proposal's option number and whether the round is new."""
    rnd, created = await open_round(s, gs, by=author_id)
    mine = await _options(s, rnd.id)
    for number, p in enumerate(mine, 1):
        if p.author_id == author_id:
            raise AlreadyProposed(number)
    if len(mine) >= MAX_PROPOSALS:
        raise RoundFull(MAX_PROPOSALS)
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
    await touch(s, gs.id)  # a lively vote is activity: the idle pause leaves the game alone
    await _changed(s, rnd)
    return rnd, len(mine) + 1, created


async def vote(s: AsyncSession, proposal_id: int, voter_id: int) -> tuple[VoteRound, int]:
    """Vote for a proposal of an open round; a second vote moves the first. Returns the round
    and the option number voted for."""
    p = await s.get(VoteProposal, proposal_id)
    if p is None:
        raise UnknownProposal()
    rnd = await s.get(VoteRound, p.round_id, with_for_update=True)
    if rnd is None or rnd.status != "open":
        raise NoOpenRound()
    gs = await session_by_id(s, rnd.session_id)
    if gs.status == "paused":
        raise SessionPaused(gs.paused_reason, gs.paused_note)
    if gs.status != "active":
        raise NoOpenRound()
    stmt = insert(VoteBallot).values(round_id=rnd.id, voter_id=voter_id, proposal_id=p.id)
    await s.execute(
        stmt.on_conflict_do_update(index_elements=["round_id", "voter_id"], set_={"proposal_id": p.id, "voted_at": func.now()})
    )
    await touch(s, gs.id)
    await _changed(s, rnd)
    number = [o.id for o in await _options(s, rnd.id)].index(p.id) + 1
    return rnd, number


async def vote_by_number(s: AsyncSession, gs: GameSession, number: int, voter_id: int) -> tuple[VoteRound, int]:
    """Vote for option `number` of the session's open round (the play page's way)."""
    rnd = await open_round_of(s, gs.id)
    if rnd is None:
        raise NoOpenRound()
    options = await _options(s, rnd.id)
    if not 1 <= number <= len(options):
        raise UnknownProposal()
    return await vote(s, options[number - 1].id, voter_id)


async def _options(s: AsyncSession, round_id: int) -> list[VoteProposal]:
    q = select(VoteProposal).where(VoteProposal.round_id == round_id).order_by(VoteProposal.id)
    return list((await s.scalars(q)).all())


async def view(s: AsyncSession, round_id: int, *, voter_id: int | None = None) -> RoundView:
    rnd = await s.get(VoteRound, round_id)
    if rnd is None:  # ids come from existing rounds, which are never deleted
        raise LookupError(f"vote round {round_id} does not exist")
    await s.refresh(rnd)
    proposals = await _options(s, round_id)
    counts = dict(
        (await s.execute(
            select(VoteBallot.proposal_id, func.count()).where(VoteBallot.round_id == round_id).group_by(VoteBallot.proposal_id)
        )).all()
    )
    options = [Option(n, p, counts.get(p.id, 0)) for n, p in enumerate(proposals, 1)]
    ballots = dict((await s.execute(select(VoteBallot.voter_id, VoteBallot.proposal_id).where(VoteBallot.round_id == round_id))).all())
    joined = [p.user_id for p in await live_players(s, rnd.session_id)]
    by_id = {o.proposal.id: o for o in options}
    mine = by_id.get(ballots[voter_id]) if voter_id is not None and voter_id in ballots else None
    return RoundView(
        round=rnd,
        options=options,
        voters=len(ballots),
        players=len(joined),
        players_voted=sum(1 for u in joined if u in ballots),
        winner=None if rnd.winner_id is None else by_id.get(rnd.winner_id),
        my_vote=mine.number if mine else None,
        turn_seq=None if rnd.turn_id is None else await s.scalar(select(Turn.seq).where(Turn.id == rnd.turn_id)),
    )


def winner_of(options: list[Option]) -> Option | None:
    """Most votes; among equals the earliest proposal (the lowest option number)."""
    if not options:
        return None
    return max(options, key=lambda o: (o.votes, -o.number))


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


@dataclass
class Closed:
    round: VoteRound
    turn_id: int | None


async def close_round(s: AsyncSession, round_id: int, settings: Settings, enqueue: Enqueue | None) -> Closed | None:
    """Close one due round in the caller's transaction: its winner becomes a turn, or it is
    void or empty. None: nothing to do now (closed elsewhere, not due, or the backlog is full)."""
    rnd = (await s.scalars(select(VoteRound).where(VoteRound.id == round_id).with_for_update(skip_locked=True))).first()
    if rnd is None or rnd.status != "open" or round_id not in await due_rounds(s, [rnd.guild_id]):
        return None
    gs = await session_by_id(s, rnd.session_id, lock=True)
    if gs.status != "active":
        await _finish(s, rnd, "void", VOIDED_PAUSE if gs.status == "paused" else VOIDED_END)
        return Closed(rnd, None)
    if not (await vote_config(s, rnd.channel_id)).enabled:
        await _finish(s, rnd, "void", VOIDED_MODE)
        return Closed(rnd, None)
    v = await view(s, rnd.id)
    best = winner_of(v.options)
    if best is None:
        await _finish(s, rnd, "closed", NO_PROPOSALS)
        return Closed(rnd, None)
    p = best.proposal
    instruction = Instruction(
        characters=tuple(p.character_names),
        character_ids=tuple(p.characters),
        motion=p.motion,
        adverb=p.adverb,
        background=p.background,
        time_of_day=p.time_of_day,
    )
    limits = (await channel_config(s, settings, gs.guild_id, gs.channel_id)).limits
    try:
        async with s.begin_nested():
            turn = await submit_turn(
                s, gs, author_id=p.author_id, author_name=p.author_name, instruction=instruction,
                limits=limits, enqueue=enqueue, via_vote=True,
            )
    except BacklogFull:
        return None  # stays open; the next check with a free slot closes it
    rnd.winner_id, rnd.turn_id = p.id, turn.id
    await _finish(s, rnd, "closed", ROUND_WON)  # RoundView.outcome_text words it from the round
    return Closed(rnd, turn.id)


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


async def _finish(s: AsyncSession, rnd: VoteRound, status: str, outcome: str) -> None:
    """Close the round; `outcome`: its code (game.stored_reasons), rendered where it is shown."""
    rnd.status = status
    rnd.outcome = outcome
    rnd.closed_at = func.now()
    await s.flush()
    await s.refresh(rnd)
    await _changed(s, rnd)


async def _changed(s: AsyncSession, rnd: VoteRound) -> None:
    await notify.notify(s, notify.SESSION_CHANGED, session_id=rnd.session_id, channel_id=rnd.channel_id, event="vote", round_id=rnd.id)


def seconds_left(rnd: VoteRound, now: datetime) -> float:
    return max(0.0, (rnd.deadline - now).total_seconds())
