"""Vote mode's rules against a real Postgres (service.voting's checks and decisions over
db.votes' rows): the tie rule, concurrent proposals opening one round, the per-round limits, the
refusals, a winner from a member who never joined, and a full backlog keeping a round open."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from db.models import Turn, VoteRound
from game.errors import GameError
from game.session_errors import NotJoined, SessionPaused
from game.turn_errors import AlreadyProposed, NoOpenRound, RoundFull, UnknownProposal, VoteModeOff, VoteModeOn
from service import admin, moderation, players, voting
from service.deps import Member, Place
from service.players import ActFields

HERE = Place(100, 200)
ALICE, MOD = Member(1, "alice"), Member(9, "mod")
WALK = ActFields("walk", "town")
QIQI_IN_SHOT = ActFields("walk", "town", others=("qiqi",))  # a proposer who plays no character names one


async def _playing(deps) -> None:
    await admin.set_film(deps, HERE, MOD, "qiqi")
    await players.start(deps, HERE, ALICE)
    await players.join(deps, HERE, ALICE, "qiqi")


def test_the_tie_rule():
    opt = lambda n, v: voting.Option(n, SimpleNamespace(), v)  # type: ignore[arg-type]  # noqa: E731
    assert voting.winner_of([]) is None
    assert voting.winner_of([opt(1, 0), opt(2, 0)]).number == 1  # nobody voted: the first proposal
    assert voting.winner_of([opt(1, 1), opt(2, 2), opt(3, 2)]).number == 2  # most votes, earliest of the tied
    assert voting.winner_of([opt(1, 0), opt(2, 3)]).number == 2


async def test_concurrent_proposals_open_one_round(deps, sessions, rounds_due):
    await _playing(deps)
    with pytest.raises(VoteModeOff):
        await voting.open_round(deps, HERE, ALICE.id)
    with pytest.raises(GameError, match="between 10 and"):
        await voting.set_mode(deps, HERE, MOD, True, 5)
    await voting.set_mode(deps, HERE, MOD, True, 60)
    with pytest.raises(VoteModeOn):
        await players.act(deps, HERE, ALICE, WALK)

    async def one(author: int):
        return await voting.propose(deps, HERE, Member(author, f"m{author}"), QIQI_IN_SHOT)

    got = await asyncio.gather(*(one(1000 + i) for i in range(8)))
    assert len({p.round.id for p in got}) == 1 and sorted(p.option for p in got) == list(range(1, 9))
    first = 1000 + next(i for i, p in enumerate(got) if p.option == 1)  # whichever proposal came first
    async with sessions() as s:
        assert len((await s.scalars(select(VoteRound))).all()) == 1
    with pytest.raises(AlreadyProposed):
        await one(1003)
    for i in range(8, voting.MAX_PROPOSALS):
        await one(1000 + i)
    with pytest.raises(RoundFull):
        await one(5000)

    # A winner whose proposer never joined still becomes a turn (a direct turn would be refused).
    await rounds_due()
    (closed,) = await voting.close_due(deps, [HERE.guild_id])
    # no votes: a tie of all, won by the earliest proposal
    assert closed.turn is not None and closed.round.status == "closed"
    async with sessions() as s:
        assert (await s.get(Turn, closed.turn.id)).author_id == first
    await voting.set_mode(deps, HERE, MOD, False)
    with pytest.raises(NotJoined):
        await players.act(deps, HERE, Member(first, f"m{first}"), QIQI_IN_SHOT)


async def test_votes_are_refused_outside_an_open_round_of_a_running_game(deps, sessions):
    await _playing(deps)
    await voting.set_mode(deps, HERE, MOD, True, 60)
    with pytest.raises(NoOpenRound):
        await voting.vote_for_option(deps, HERE, 1, ALICE.id)
    proposed = await voting.propose(deps, HERE, ALICE, WALK)
    with pytest.raises(UnknownProposal):
        await voting.vote_for_option(deps, HERE, 2, ALICE.id)
    with pytest.raises(UnknownProposal):
        await voting.vote(deps, 10**12, ALICE.id)
    assert (await voting.vote_for_option(deps, HERE, 1, ALICE.id))[1] == 1
    await moderation.pause(deps, HERE, MOD, "a break")
    with pytest.raises(SessionPaused, match="a break"):
        await voting.vote_for_option(deps, HERE, 1, 2)
    with pytest.raises(SessionPaused):
        await voting.propose(deps, HERE, Member(2, "bob"), QIQI_IN_SHOT)
    (voided,) = await voting.close_due(deps, [HERE.guild_id])  # a paused game's round is void
    assert voided.round.id == proposed.round.id and voided.round.status == "void" and voided.turn is None
    await moderation.resume(deps, HERE, MOD)
    options = [o.proposal.id for o in (await voting.round_shown(deps, proposed.round.id)).view.options]
    with pytest.raises(NoOpenRound):
        await voting.vote(deps, options[0], ALICE.id)


async def test_a_full_backlog_keeps_the_round_open_until_a_slot_frees(deps, sessions, rounds_due):
    await _playing(deps)
    await admin.set_limits(deps, HERE, MOD, backlog=1)
    waiting = (await players.act(deps, HERE, ALICE, WALK)).turn
    await voting.set_mode(deps, HERE, MOD, True, 60)
    proposed = await voting.propose(deps, HERE, Member(7, "m7"), QIQI_IN_SHOT)
    await rounds_due()
    assert await voting.close_due(deps, [HERE.guild_id]) == []
    async with sessions() as s:
        assert (await s.get(VoteRound, proposed.round.id)).status == "open"
    await moderation.cancel(deps, HERE, MOD, turn_id=waiting.id)
    (closed,) = await voting.close_due(deps, [HERE.guild_id])
    assert (closed.round.status, closed.round.outcome) == ("closed", "won")
    async with sessions() as s:
        assert (await s.get(Turn, closed.turn.id)).author_name == "m7"
    view = (await voting.round_shown(deps, proposed.round.id)).view
    # Stored as a code; shown per locale, the winner's line worded from the round with plurals.
    assert view.turn_seq == 2 and view.outcome_text() == "Option 1 won with 0 votes: it is turn #2."
