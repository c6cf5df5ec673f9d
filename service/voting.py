"""Vote mode's actions: propose, open a round, vote, close the due rounds, and an admin turning
the mode on or off; and a round's message, as a face shows it: what it shows (a frozen
RoundView), the message's id, and when it showed the round's result.

The rules are written out in db/votes.py's docstring; the checks and the decisions are here (who
may propose, whether a round is void, which proposal wins), each in the action's transaction after
the round's or the game's row is locked. db/votes.py reads, locks and writes the rows."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from db import sessions, votes
from db.models import VoteProposal, VoteRound
from db.turn_reads import get_turn
from game.catalogue import Film, display_film, session_film
from game.content_rules import RuleSet
from game.errors import GameError
from game.instruction import Instruction
from game.sanitize import InputRefused
from game.stored_reasons import NO_PROPOSALS, ROUND_WON, VOIDED_END, VOIDED_MODE, VOIDED_PAUSE, round_outcome
from game.texts import Later
from game.turn_errors import (
    AlreadyProposed,
    BacklogFull,
    NoOpenRound,
    RoundFull,
    ServerQuota,
    UnknownProposal,
    VoteModeOff,
)
from i18n import L_, ngettext
from i18n.formatting import number as format_number
from service import refusals
from service.configs import config
from service.deps import Deps, Member, Place
from service.players import ActFields
from service.results import TurnRef
from service.shares import check_quota
from service.turn_queue import queue_turn

log = logging.getLogger(__name__)

MAX_PROPOSALS = 20  # a round's message carries one button per proposal (Discord allows 25)
MIN_ROUND_SECONDS, MAX_ROUND_SECONDS = 10, 24 * 3600


# --- a round as faces show it: frozen copies of its rows


@dataclass(frozen=True)
class RoundRow:
    id: int
    session_id: int
    guild_id: int
    channel_id: int
    status: str  # open, closed or void
    deadline: datetime
    outcome: str | None  # how it ended, a code (game.stored_reasons); None while open
    turn_id: int | None  # the turn its winner became
    message_id: int | None  # its message (the bot's)

    @classmethod
    def of(cls, r: VoteRound) -> RoundRow:
        return cls(r.id, r.session_id, r.guild_id, r.channel_id, r.status, r.deadline, r.outcome, r.turn_id, r.message_id)


@dataclass(frozen=True)
class ProposalRow:
    id: int
    author_id: int
    author_name: str
    instruction: str  # "" for a shot taken down (db.removal)

    @classmethod
    def of(cls, p: VoteProposal) -> ProposalRow:
        return cls(p.id, p.author_id, p.author_name, p.instruction)


@dataclass(frozen=True)
class Option:
    number: int  # 1-based, in proposal order: what members see and vote for
    proposal: ProposalRow
    votes: int


@dataclass(frozen=True)
class RoundView:
    """Everything a face shows of a round."""

    round: RoundRow
    options: tuple[Option, ...]
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


def winner_of(options: Sequence[Option]) -> Option | None:
    """Most votes; among equals the earliest proposal (the lowest option number)."""
    if not options:
        return None
    return max(options, key=lambda o: (o.votes, -o.number))


async def view(s: AsyncSession, round_id: int, voter_id: int | None = None) -> RoundView:
    """Round `round_id` as read now, with `voter_id`'s vote."""
    rows = await votes.round_rows(s, round_id)
    options = tuple(Option(n, ProposalRow.of(p), rows.counts.get(p.id, 0)) for n, p in enumerate(rows.proposals, 1))
    by_id = {o.proposal.id: o for o in options}
    mine = by_id.get(rows.ballots[voter_id]) if voter_id is not None and voter_id in rows.ballots else None
    return RoundView(
        round=RoundRow.of(rows.round),
        options=options,
        voters=len(rows.ballots),
        players=len(rows.players),
        players_voted=sum(1 for u in rows.players if u in rows.ballots),
        winner=None if rows.round.winner_id is None else by_id.get(rows.round.winner_id),
        my_vote=mine.number if mine else None,
        turn_seq=rows.turn_seq,
    )


# --- the actions


@dataclass(frozen=True)
class Proposed:
    round: RoundRow
    option: int  # the proposal's number in the round
    film: Film
    instruction: Instruction


@dataclass(frozen=True)
class RoundMessage:
    """What a round's message shows: the round with its proposals and votes, and its game's film
    (a withdrawn film's stand-in)."""

    view: RoundView
    film: Film


@dataclass(frozen=True)
class Closed:
    round: RoundRow
    turn: TurnRef | None  # the winner's turn
    position: int | None


async def _open(s: AsyncSession, place: Place, by: int) -> tuple[VoteRound, bool]:
    """The open round of the channel's running game (opening one); refused when its game is
    paused or the channel is not in vote mode. The round's row is locked, not the game's: closing
    a round locks the round, then its game (db.votes.lock_due_round), and the other order could
    deadlock with it; a pause meanwhile voids the round when it closes."""
    gs = await refusals.running_session(s, place.channel_id)
    cfg = await votes.vote_config(s, place.channel_id)
    if not cfg.enabled:
        raise VoteModeOff()
    return await votes.open_round(s, gs, by, cfg.round_seconds)


async def propose(deps: Deps, place: Place, who: Member, fields: ActFields, extra_rules: Sequence[RuleSet] = ()) -> Proposed:
    """A proposal for the open round (opening one): the proposer's character, if they joined, and
    the `others`. A member playing no character gives a name to be shown by. One proposal per
    member per round, at most MAX_PROPOSALS."""
    async with deps.sessions.begin() as s:
        rnd, _created = await _open(s, place, who.id)
        gs = await sessions.session_by_id(s, rnd.session_id)
        film = session_film(gs.film_id)
        cfg = await config(deps, s, place)
        me = await sessions.player_of(s, gs.id, who.id)
        if who.name is None and me is None:
            raise InputRefused("name", L_("is empty; please type something"))
        name = cfg.name_to_show(who.name, extra_rules) if who.name is not None else me.user_name if me else ""
        ins = cfg.instruction(film, votes.shot_characters(me.character_id if me else None, list(fields.others)),
                              fields.motion, fields.background, fields.adverb, fields.time_of_day, extra_rules=extra_rules)
        made = await votes.options(s, rnd.id)
        for n, p in enumerate(made, 1):
            if p.author_id == who.id:
                raise AlreadyProposed(n)
        if len(made) >= MAX_PROPOSALS:
            raise RoundFull(MAX_PROPOSALS)
        await votes.add_proposal(s, rnd, author_id=who.id, author_name=name, instruction=ins)
    return Proposed(RoundRow.of(rnd), len(made) + 1, film, ins)


async def open_round(deps: Deps, place: Place, user_id: int) -> tuple[RoundRow, bool]:
    """The open round, or a new one (True)."""
    async with deps.sessions.begin() as s:
        rnd, created = await _open(s, place, user_id)
        return RoundRow.of(rnd), created


async def _ballot(s: AsyncSession, rnd: VoteRound | None, proposal_id: int, user_id: int) -> tuple[RoundRow, int]:
    """A vote in `rnd` (locked): refused unless the round is open and its game running."""
    if rnd is None or rnd.status != "open":
        raise NoOpenRound()
    gs = await sessions.session_by_id(s, rnd.session_id)
    if gs.status == "archived":
        raise NoOpenRound()
    refusals.require_running(gs)
    numbers = [p.id for p in await votes.options(s, rnd.id)]
    await votes.cast_ballot(s, rnd, proposal_id, user_id)
    return RoundRow.of(rnd), numbers.index(proposal_id) + 1


async def vote(deps: Deps, proposal_id: int, user_id: int) -> tuple[RoundRow, int]:
    """A vote for a proposal (a second one moves the first); returns its round and option number."""
    async with deps.sessions.begin() as s:
        p = await votes.proposal(s, proposal_id)
        if p is None:
            raise UnknownProposal()
        return await _ballot(s, await votes.lock_round(s, p.round_id), p.id, user_id)


async def vote_for_option(deps: Deps, place: Place, option: int, user_id: int) -> tuple[RoundRow, int]:
    """A vote for option `option` of the channel's open round."""
    async with deps.sessions.begin() as s:
        gs = await refusals.live_session(s, place.channel_id)
        rnd = await votes.open_round_of(s, gs.id, lock=True)
        if rnd is None:
            raise NoOpenRound()
        made = await votes.options(s, rnd.id)
        if not 1 <= option <= len(made):
            raise UnknownProposal()
        return await _ballot(s, rnd, made[option - 1].id, user_id)


async def _close(deps: Deps, s: AsyncSession, round_id: int) -> tuple[VoteRound, int | None] | None:
    """Close one due round (db.votes' rules): its winner becomes a turn, or it is void or empty.
    None: nothing to do now (closed elsewhere, not due, or the backlog or the server's quota is
    full: the round stays open and the next check with a free slot closes it)."""
    rnd = await votes.lock_due_round(s, round_id)
    if rnd is None:
        return None
    gs = await sessions.session_by_id(s, rnd.session_id, lock=True)
    if gs.status != "active":
        await votes.finish(s, rnd, "void", VOIDED_PAUSE if gs.status == "paused" else VOIDED_END)
        return rnd, None
    if not (await votes.vote_config(s, rnd.channel_id)).enabled:
        await votes.finish(s, rnd, "void", VOIDED_MODE)
        return rnd, None
    best = winner_of((await view(s, rnd.id)).options)
    if best is None:
        await votes.finish(s, rnd, "closed", NO_PROPOSALS)
        return rnd, None
    p = await votes.proposal(s, best.proposal.id)
    assert p is not None, "a round's proposals are never deleted"
    # Credited to its proposer, who need not have joined; no cooldown (the round paces the channel).
    # The server's quota holds (its share of the GPU), not the proposer's: the channel chose it.
    place = Place(gs.guild_id, gs.channel_id)
    limits = (await config(deps, s, place)).limits
    try:
        async with s.begin_nested():
            await check_quota(deps, s, place, None)
            turn = await queue_turn(s, gs, author_id=p.author_id, author_name=p.author_name,
                                    instruction=votes.proposed_instruction(p), limits=replace(limits, cooldown_seconds=0),
                                    enqueue=deps.jobs.enqueue)
    except (BacklogFull, ServerQuota):
        return None
    await votes.won(s, rnd, p.id, turn.id, ROUND_WON)  # RoundView.outcome_text words it from the round
    return rnd, turn.id


async def close_due(deps: Deps, guild_ids: Collection[int], *, shown: bool = False) -> list[Closed]:
    """Close the due rounds of `guild_ids`, each in its own transaction: a round that fails to
    close stays open and the next check tries again. `shown`: the result is read from the row
    (the page), so it counts as shown at once; else the face marks it when its message shows it."""
    async with deps.sessions() as s:
        due = await votes.due_rounds(s, list(guild_ids))
    done: list[Closed] = []
    for round_id in due:
        try:
            async with deps.sessions.begin() as s:
                closed = await _close(deps, s, round_id)
                if closed is None:
                    continue
                rnd, turn_id = closed
                turn = None if turn_id is None else await get_turn(s, turn_id)
                position = None if turn is None else await deps.jobs.position(s, turn)
                if shown:
                    await votes.mark_shown(s, round_id)
                result = Closed(RoundRow.of(rnd), None if turn is None else TurnRef.of(turn), position)
        except Exception as e:
            log.warning("closing vote round %s failed: %s", round_id, e)
            continue
        done.append(result)
    return done


async def set_mode(deps: Deps, place: Place, who: Member, enabled: bool,
                   seconds: int | None = None) -> tuple[votes.VoteConfig, list[RoundRow]]:
    """Admins: vote mode on or off (and a round's length); returns the mode and the rounds voided."""
    if seconds is not None and not MIN_ROUND_SECONDS <= seconds <= MAX_ROUND_SECONDS:
        raise GameError(L_("A round lasts between %(low)s and %(high)s seconds.",
                           low=MIN_ROUND_SECONDS, high=Later(format_number, MAX_ROUND_SECONDS)))
    async with deps.sessions.begin() as s:
        cfg, voided = await votes.set_mode(s, place.guild_id, place.channel_id, enabled, seconds)
        await deps.record(s, place, who, "vote_mode", "on" if enabled else "off", round_seconds=cfg.round_seconds)
    return cfg, [RoundRow.of(r) for r in voided]


# --- a round's message


async def round_shown(deps: Deps, round_id: int) -> RoundMessage:
    """What round `round_id`'s message shows now."""
    async with deps.sessions() as s:
        v = await view(s, round_id)
        gs = await sessions.session_by_id(s, v.round.session_id)
    return RoundMessage(v, display_film(gs.film_id))


async def set_message(deps: Deps, round_id: int, message_id: int) -> None:
    """The round's message was posted: later updates edit message `message_id`."""
    async with deps.sessions.begin() as s:
        await votes.set_message(s, round_id, message_id)


async def mark_shown(deps: Deps, round_id: int) -> None:
    """The finished round's message shows its result; until then it is one of the `unshown`."""
    async with deps.sessions.begin() as s:
        await votes.mark_shown(s, round_id)


async def unshown(deps: Deps, guild_ids: Collection[int]) -> list[RoundRow]:
    """The finished rounds of `guild_ids` whose result is not shown yet (a restart in between)."""
    async with deps.sessions() as s:
        return [RoundRow.of(r) for r in await votes.unshown(s, guild_ids)]
