"""A vote round's message as a face shows it (service.voting): what it shows, its message id,
and the finished rounds whose result is not shown yet, against a real Postgres."""

from __future__ import annotations

from sqlalchemy import select, update

from db.models import GameSession, VoteRound
from service import admin, players, voting
from service.deps import Member, Place
from service.players import ActFields

HERE = Place(100, 200)
ALICE, MOD = Member(1, "alice"), Member(9, "mod")


async def test_a_rounds_message_from_open_to_its_result_shown(deps, sessions, rounds_due):
    await admin.set_film(deps, HERE, MOD, "qiqi")
    await players.start(deps, HERE, ALICE)
    await players.join(deps, HERE, ALICE, "qiqi")
    await voting.set_mode(deps, HERE, MOD, True, 60)
    proposed = await voting.propose(deps, HERE, ALICE, ActFields("walk", "town"))
    await voting.vote_for_option(deps, HERE, 1, ALICE.id)
    shown = await voting.round_shown(deps, proposed.round.id)
    assert (shown.view.round.status, shown.view.round.message_id, shown.film.id) == ("open", None, "qiqi")
    assert ([o.number for o in shown.view.options], shown.view.voters, shown.view.players) == ([1], 1, 1)
    await voting.set_message(deps, proposed.round.id, 4242)
    assert (await voting.round_shown(deps, proposed.round.id)).view.round.message_id == 4242
    assert await voting.unshown(deps, [HERE.guild_id]) == []  # open: nothing to show yet
    await rounds_due()
    (closed,) = await voting.close_due(deps, [HERE.guild_id])
    assert [r.id for r in await voting.unshown(deps, [HERE.guild_id])] == [closed.round.id]
    assert await voting.unshown(deps, [HERE.guild_id + 1]) == []  # another server's
    shown = await voting.round_shown(deps, closed.round.id)
    assert (shown.view.round.status, shown.view.winner and shown.view.winner.number) == ("closed", 1)
    await voting.mark_shown(deps, closed.round.id)
    assert await voting.unshown(deps, [HERE.guild_id]) == []
    async with sessions() as s:
        assert await s.scalar(select(VoteRound.result_shown_at).where(VoteRound.id == closed.round.id)) is not None


async def test_a_withdrawn_films_round_still_shows(deps, sessions):
    await admin.set_film(deps, HERE, MOD, "qiqi")
    await players.start(deps, HERE, ALICE)
    await voting.set_mode(deps, HERE, MOD, True, 60)
    rnd, _created = await voting.open_round(deps, HERE, ALICE.id)
    async with sessions.begin() as s:
        await s.execute(update(GameSession).values(film_id="gone"))
    assert (await voting.round_shown(deps, rnd.id)).film.title == "gone (withdrawn)"
