"""Vote-mode services against a real Postgres: the tie rule, concurrent proposals opening one
round, the per-round limits, and a winner from a member who never joined."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from sqlalchemy import func, select

from db import turn_reads, votes
from db.models import GameSession, VoteRound
from game.instruction import build_instruction
from game.session_errors import NotJoined
from game.turn_errors import AlreadyProposed, RoundFull, VoteModeOff, VoteModeOn
from tests.db.test_services import CHANNEL, GUILD, QIQI, _game, _submit


def test_the_tie_rule():
    opt = lambda n, v: votes.Option(n, SimpleNamespace(), v)  # noqa: E731
    assert votes.winner_of([]) is None
    assert votes.winner_of([opt(1, 0), opt(2, 0)]).number == 1  # nobody voted: the first proposal
    assert votes.winner_of([opt(1, 1), opt(2, 2), opt(3, 2)]).number == 2  # most votes, earliest of the tied
    assert votes.winner_of([opt(1, 0), opt(2, 3)]).number == 2


def _ins(chars=("qiqi",), motion="walk"):
    return build_instruction(QIQI, list(chars), motion, "town")


async def test_concurrent_proposals_open_one_round(sessions, settings):
    gs = await _game(sessions)
    async with sessions.begin() as s:
        with pytest.raises(VoteModeOff):
            await votes.open_round(s, await s.get(GameSession, gs.id), by=1)
    async with sessions.begin() as s:
        await votes.set_mode(s, GUILD, CHANNEL, True, 60)
    with pytest.raises(VoteModeOn):
        await _submit(sessions, gs)

    async def one(author: int):
        async with sessions.begin() as s:
            g = await s.get(GameSession, gs.id)
            return await votes.propose(s, g, author_id=author, author_name=f"m{author}", instruction=_ins())

    got = await asyncio.gather(*(one(1000 + i) for i in range(8)))
    assert len({rnd.id for rnd, _, _ in got}) == 1 and sum(created for _, _, created in got) == 1
    assert sorted(n for _, n, _ in got) == list(range(1, 9))
    async with sessions.begin() as s:
        g = await s.get(GameSession, gs.id)
        with pytest.raises(AlreadyProposed):
            await votes.propose(s, g, author_id=1003, author_name="m", instruction=_ins())
    for i in range(8, votes.MAX_PROPOSALS):
        await one(1000 + i)
    with pytest.raises(RoundFull):
        await one(5000)

    # A winner whose proposer never joined still becomes a turn (a direct turn would be refused).
    async with sessions.begin() as s:
        rnd = (await s.scalars(select(VoteRound))).one()
        rnd.deadline = func.now()
    async with sessions.begin() as s:
        closed = await votes.close_round(s, rnd.id, settings, enqueue=None)
    assert closed is not None and closed.turn_id is not None
    async with sessions.begin() as s:
        await votes.set_mode(s, GUILD, CHANNEL, False)
    with pytest.raises(NotJoined):
        await _submit(sessions, gs, author=1000)


async def test_a_full_backlog_keeps_the_round_open_until_a_slot_frees(sessions, settings):
    from db import guilds, turns

    gs = await _game(sessions)
    async with sessions.begin() as s:
        await guilds.set_limits(s, settings, GUILD, backlog_cap=1)
    waiting = await _submit(sessions, gs)
    async with sessions.begin() as s:
        await votes.set_mode(s, GUILD, CHANNEL, True, 60)
        rnd, _, _ = await votes.propose(s, await s.get(GameSession, gs.id), author_id=7, author_name="m7", instruction=_ins())
        rnd.deadline = func.now()
    async with sessions.begin() as s:
        assert await votes.due_rounds(s, [GUILD]) == [rnd.id]
        assert await votes.close_round(s, rnd.id, settings, enqueue=None) is None
    async with sessions() as s:
        assert (await s.get(VoteRound, rnd.id)).status == "open"
    async with sessions.begin() as s:
        await turns.cancel_turn(s, await turn_reads.get_turn(s, waiting.id))
    async with sessions.begin() as s:
        closed = await votes.close_round(s, rnd.id, settings, enqueue=None)
    assert closed is not None and closed.round.status == "closed" and closed.round.outcome == "won"
    async with sessions() as s:
        view = await votes.view(s, rnd.id)
    # Stored as a code; shown per locale, the winner's line worded from the round with plurals.
    assert view.turn_seq == 2 and view.outcome_text() == "Option 1 won with 0 votes: it is turn #2."
