"""What members read of a channel's games against a real Postgres and the real turn queue: the
bot's read commands' (service.listings: the live game, a game by its number, history, the waiting
turns with their places, the export check, the channel's games), the play page's (service.views:
the table, the page's list of turns, a turn by id with its clip, the latest vote round) and what
the channel plays (service.reads, both faces')."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from db.models import Turn
from game.errors import NothingToExport
from game.session_errors import NoSession, UnknownGame
from service import admin, listings, moderation, players, reads, views, voting
from service.deps import Deps, Member, Place
from service.players import ActFields

HERE = Place(100, 200)
ELSEWHERE = Place(100, 201)
ALICE, BOB, MOD = Member(1, "alice"), Member(2, "bob"), Member(9, "mod")
WALK = ActFields("walk", "town")
TAKEN_DOWN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # when a test takes a turn down


async def _playing(deps: Deps) -> int:
    """The live game's id."""
    await admin.set_film(deps, HERE, MOD, "qiqi")
    started = await players.start(deps, HERE, ALICE)
    await players.join(deps, HERE, ALICE, "qiqi")
    await players.join(deps, HERE, BOB, "jiji")
    return started.session_id


async def _set(sessions, turn_id: int, **values) -> None:
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == turn_id).values(**values))


async def test_no_game_here_is_refused_and_the_page_gets_its_config_alone(deps):
    await admin.set_film(deps, HERE, MOD, "qiqi")
    for read in (listings.standing, listings.waiting, listings.exportable):
        with pytest.raises(NoSession):
            await read(deps, HERE)
    with pytest.raises(NoSession):
        await listings.history(deps, HERE, 10)
    table = await views.table(deps, HERE)
    assert (table.config.film and table.config.film.id, table.session, table.players, table.pending) == ("qiqi", None, (), ())
    assert await views.turns_page(deps, HERE) == views.TurnsView(None, (), False)
    assert await listings.channel_games(deps, HERE) == []


async def test_the_live_game_has_its_players_in_join_order_and_their_characters_states(deps):
    game = await _playing(deps)
    live = await listings.standing(deps, HERE)
    assert (live.film_id, live.status, live.next_seq) == ("qiqi", "active", 1)
    assert [(p.user_name, p.character_id) for p in live.players] == [("alice", "qiqi"), ("bob", "jiji")]
    assert {c: (st.stamina, st.social, st.entertainment) for c, st in live.states.items()} == {
        "qiqi": (50, 50, 50), "jiji": (50, 50, 50)}
    acted = await players.act(deps, HERE, ALICE, WALK)
    table = await views.table(deps, HERE)
    assert table.session is not None and table.session.id == game
    assert (table.players, table.states) == (live.players, live.states)
    assert table.pending == (acted.turn.id,)
    with pytest.raises(NoSession):  # another channel's game is not this one's
        await listings.standing(deps, ELSEWHERE)


async def test_waiting_turns_have_their_places_and_the_pages_list_counts_only_queued_ones(deps, sessions):
    """In the film's queue the running turn is being made (0) and the next ones follow; the page's
    list gives a place to queued turns only (a running one shows its progress instead)."""
    await _playing(deps)
    first = (await players.act(deps, HERE, ALICE, WALK)).turn
    await players.act(deps, HERE, BOB, WALK)
    assert [(w.seq, w.position) for w in await listings.waiting(deps, HERE)] == [(1, 1), (2, 2)]
    await _set(sessions, first.id, status="running")
    assert [(w.seq, w.position) for w in await listings.waiting(deps, HERE)] == [(1, 0), (2, 1)]
    page = await views.turns_page(deps, HERE, only_pending=True)
    assert [(t.seq, t.position) for t in page.turns] == [(1, None), (2, 1)] and not page.more


async def test_the_pages_list_pages_back_from_the_newest_and_leaves_out_removed_turns(deps, sessions):
    await _playing(deps)
    turns = [(await players.act(deps, HERE, ALICE, WALK)).turn for _ in range(4)]
    await _set(sessions, turns[1].id, removed_at=TAKEN_DOWN)  # taken down: gone from the page
    newest = await views.turns_page(deps, HERE, limit=2)
    assert ([t.seq for t in newest.turns], newest.more) == ([3, 4], True)
    older = await views.turns_page(deps, HERE, limit=2, before=3)
    assert ([t.seq for t in older.turns], older.more) == ([1], False)


async def test_past_games_by_number_their_history_and_what_can_be_exported(deps, sessions):
    """A reset archives game 1 and starts game 2: both are reached by number, the live one also
    without; a game with no finished clip has nothing to export. (/history's lines carry no game
    id: game 1 is told from game 2 by its turns, game 2 has none.)"""
    game = await _playing(deps)
    first = (await players.act(deps, HERE, ALICE, WALK)).turn
    await players.act(deps, HERE, BOB, ActFields("run", "field"))
    with pytest.raises(NothingToExport):
        await listings.exportable(deps, HERE)
    await _set(sessions, first.id, status="done", mp4_size=1000)
    assert await listings.exportable(deps, HERE) == listings.Exportable(game, "qiqi")
    done = await moderation.reset(deps, HERE, MOD)
    assert done.old.id == game

    assert [(t.seq, t.author_name) for t in (await listings.history(deps, HERE, 1, number=1)).turns] == [(2, "bob")]  # the latest one
    assert [t.seq for t in (await listings.history(deps, HERE, 10, number=1)).turns] == [1, 2]
    fresh = await listings.history(deps, HERE, 10, number=2)
    assert fresh == await listings.history(deps, HERE, 10) == listings.History("qiqi", [])  # no turn yet
    with pytest.raises(UnknownGame):
        await listings.history(deps, HERE, 1, number=3)
    assert (await listings.exportable(deps, HERE, 1)).session_id == game
    with pytest.raises(NothingToExport):
        await listings.exportable(deps, HERE)

    listed = await listings.channel_games(deps, HERE)
    assert [(g.number, g.status, g.turns, g.done) for g in listed] == [(1, "archived", 2, 1), (2, "active", 0, 0)]


async def test_a_turn_by_id_is_the_channels_own_with_its_place_and_its_clip_on_request(deps, sessions):
    """Another channel's turn, or an id no turn has (even past bigint), is not there; a queued turn
    has its place, a running one none; one taken down is still read (a face decides to hide it)."""
    game = await _playing(deps)
    first = (await players.act(deps, HERE, ALICE, WALK)).turn
    second = (await players.act(deps, HERE, BOB, WALK)).turn
    for missing in ((ELSEWHERE, first.id), (HERE, second.id + 1000), (HERE, 2**70)):
        assert await views.turn(deps, *missing) is None
    found = await views.turn(deps, HERE, second.id)
    assert found is not None
    assert (found.turn.seq, found.turn.position, found.turn.session_id, found.film_id, found.clip) == (2, 2, game, "qiqi", None)
    await _set(sessions, first.id, status="running")
    running = await views.turn(deps, HERE, first.id)
    assert running is not None and running.turn.position is None
    await _set(sessions, first.id, status="done", mp4=b"clip-bytes", mp4_size=10, removed_at=TAKEN_DOWN)
    done = await views.turn(deps, HERE, first.id, clip=True)
    assert done is not None and (done.clip, done.turn.position, done.turn.removed) == (b"clip-bytes", None, True)
    assert done.turn.has_clip


async def test_what_the_channel_plays_is_its_live_games_film_else_the_configured_one_and_its_vote_mode(deps):
    await admin.set_film(deps, HERE, MOD, "qiqi")
    here = await reads.playing(deps, HERE)
    assert (here.config.film and here.config.film.id, here.film and here.film.id, here.voting.enabled) == ("qiqi", "qiqi", False)
    await players.start(deps, HERE, ALICE)
    await admin.set_film(deps, HERE, MOD, "ponyo")  # new games will use it; the live one keeps its film
    await voting.set_mode(deps, HERE, MOD, True, 60)
    here = await reads.playing(deps, HERE)
    assert (here.config.film and here.config.film.id, here.film and here.film.id) == ("ponyo", "qiqi")
    assert (here.voting.enabled, here.voting.round_seconds) == (True, 60)


async def test_the_latest_vote_round_with_the_askers_vote(deps):
    await _playing(deps)
    now = datetime.now(UTC)  # the open round's time left is counted from it (not asserted)
    assert (await views.latest_round(deps, ELSEWHERE, now)).round is None  # no game there
    await voting.set_mode(deps, HERE, MOD, True, 60)
    mode = await views.latest_round(deps, HERE, now, ALICE.id)
    assert (mode.enabled, mode.round_seconds, mode.round, mode.seconds_left) == (True, 60, None, 0.0)
    await voting.propose(deps, HERE, ALICE, WALK)
    await voting.propose(deps, HERE, BOB, ActFields("run", "field"))
    await voting.vote_for_option(deps, HERE, 2, ALICE.id)
    view = (await views.latest_round(deps, HERE, now, ALICE.id)).round
    assert view is not None and view.round.status == "open" and view.my_vote == 2
    assert [(o.number, o.proposal.author_name, o.votes) for o in view.options] == [(1, "alice", 0), (2, "bob", 1)]
    bobs = (await views.latest_round(deps, HERE, now, BOB.id)).round
    assert bobs is not None and bobs.my_vote is None
