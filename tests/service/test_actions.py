"""The game service's actions against a real Postgres and the real turn queue (procrastinate's
tables): what both faces (the bot's cogs, the play page's routes) get when they call them."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, text, update

from db.models import AuditLog, GameSession, Player, Turn, VoteRound
from game.content_errors import ContentRefused
from game.content_rules import OPERATOR, RuleSet
from game.errors import FilmFixed
from game.sanitize import InputRefused
from game.session_errors import (
    AlreadyJoined,
    CharacterTaken,
    NoSession,
    NotJoined,
    PlayerNotInGame,
    SessionExists,
    SessionPaused,
    UnknownCharacter,
)
from game.turn_errors import NotTurnAuthor, TurnNotFinished, TurnNotFound, VoteModeOn
from service import admin, moderation, players, voting
from service.deps import Deps, Member, Place
from service.jobs import StoredJobs
from service.players import ActFields

HERE = Place(100, 200)
ELSEWHERE = Place(100, 201)
ALICE, BOB, MOD = Member(1, "alice"), Member(2, "bob"), Member(9, "mod")
WALK = ActFields("walk", "town")


async def _row(sessions, turn_id: int) -> Turn:
    """The turn's row as stored (the actions hand back its id and number only)."""
    async with sessions() as s:
        row = await s.get(Turn, turn_id)
    assert row is not None
    return row


async def _jobs(sessions) -> list[str]:
    async with sessions() as s:
        return list((await s.scalars(text("SELECT status::text FROM procrastinate_jobs ORDER BY id"))).all())


async def _playing(deps: Deps) -> None:
    await admin.set_film(deps, HERE, MOD, "qiqi")
    await players.start(deps, HERE, ALICE)
    await players.join(deps, HERE, ALICE, "qiqi")
    await players.join(deps, HERE, BOB, "jiji")


async def test_start_join_act_queue_a_job_with_its_place(deps, sessions):
    await admin.set_film(deps, HERE, MOD, "qiqi")
    with pytest.raises(FilmFixed):  # another film than the configured one: admins only
        await players.start(deps, HERE, ALICE, "ponyo")
    started = await players.start(deps, HERE, ALICE)
    assert started.film.id == "qiqi" and started.name == "alice"
    with pytest.raises(UnknownCharacter):
        await players.join(deps, HERE, ALICE, "totoro")
    with pytest.raises(NotJoined):
        await players.act(deps, HERE, ALICE, WALK)
    joined = await players.join(deps, HERE, ALICE, "qiqi")
    assert (joined.player.user_name, joined.player.character_id) == ("alice", "qiqi")

    done = await players.act(deps, HERE, ALICE, ActFields("fly on broomstick", "sky", others=["Jiji"]))
    assert done.turn.seq == 1 and done.position == 1 and (await _row(sessions, done.turn.id)).job_id is not None
    assert done.instruction.text == "Character: Qiqi, Jiji; Motion: fly on broomstick; Background: sky."
    assert await _jobs(sessions) == ["todo"]
    left = await players.leave(deps, HERE, ALICE.id)
    assert left.player.character_id == "qiqi"
    with pytest.raises(NotJoined):
        await players.leave(deps, HERE, ALICE.id)


async def test_start_join_leave_kick_refusals_leave_the_game_as_it_was(deps, sessions):
    await _playing(deps)
    with pytest.raises(SessionExists):
        await players.start(deps, HERE, BOB)
    with pytest.raises(AlreadyJoined, match="Qiqi"):
        await players.join(deps, HERE, ALICE, "jiji")
    with pytest.raises(CharacterTaken, match="alice"):
        await players.join(deps, HERE, Member(3, "carol"), "qiqi")
    with pytest.raises(NotJoined):
        await players.leave(deps, HERE, 3)
    with pytest.raises(PlayerNotInGame, match="carol"):
        await moderation.kick(deps, HERE, MOD, Member(3, "carol"))
    async with sessions() as s:
        games = (await s.scalars(select(GameSession.id))).all()
        playing = (await s.execute(select(Player.user_id, Player.character_id).where(Player.left_at.is_(None))
                                   .order_by(Player.user_id))).all()
    assert len(games) == 1 and [tuple(p) for p in playing] == [(1, "qiqi"), (2, "jiji")]
    await moderation.kick(deps, HERE, MOD, BOB)
    joined = await players.join(deps, HERE, Member(3, "carol"), "jiji")  # bob's character is free again
    assert (joined.player.user_id, joined.player.character_id) == (3, "jiji")


async def test_a_page_player_acts_under_the_name_they_joined_with(sessions, settings):
    page = Deps(settings, sessions, StoredJobs(), audited=False)
    await _playing(page)
    done = await players.act(page, HERE, Member(ALICE.id), WALK)  # no name given: the stored one
    row = await _row(sessions, done.turn.id)
    assert (row.author_name, row.job_id, done.position) == ("alice", None, None)
    async with sessions() as s:
        assert await s.scalar(select(func.count()).select_from(AuditLog)) == 0  # the page keeps no audit log


async def test_reset_cancels_the_waiting_turns_and_their_jobs(deps, sessions):
    await _playing(deps)
    await players.act(deps, HERE, ALICE, WALK)
    await players.act(deps, HERE, BOB, WALK)
    done = await moderation.reset(deps, HERE, MOD)
    assert [t.seq for t in done.cancelled] == [1, 2] and done.fresh.id != done.old.id
    assert await _jobs(sessions) == ["cancelled", "cancelled"]
    async with sessions() as s:
        kept = (await s.scalars(select(Player.user_id).where(Player.session_id == done.fresh.id).order_by(Player.user_id))).all()
        actions = (await s.scalars(select(AuditLog.action).order_by(AuditLog.id))).all()
    assert list(kept) == [1, 2]
    assert list(actions) == ["set_film", "reset"]


async def test_a_film_change_with_restart_resets_into_the_new_film_without_players(deps, sessions):
    await _playing(deps)
    await players.act(deps, HERE, ALICE, WALK)
    film = await admin.set_film(deps, HERE, MOD, "ponyo", restart=True)
    async with sessions() as s:
        live = (await s.scalars(select(GameSession).where(GameSession.status != "archived"))).one()
        playing = await s.scalar(select(func.count()).select_from(Player).where(Player.session_id == live.id,
                                                                               Player.left_at.is_(None)))
    assert (film.id, live.film_id, playing) == ("ponyo", "ponyo", 0)
    assert await _jobs(sessions) == ["cancelled"]


async def test_pause_resume_cancel_kick(deps, sessions):
    await _playing(deps)
    with pytest.raises(ContentRefused):
        await moderation.pause(deps, HERE, MOD, "a dragon did it", [RuleSet.of(OPERATOR, ["*dragon*"])])
    gs = await moderation.pause(deps, HERE, MOD, "lunch")
    assert (gs.paused_reason, gs.paused_note) == ("moderator_words", "lunch")  # a code, the words apart
    with pytest.raises(SessionPaused):
        await players.act(deps, HERE, ALICE, WALK)
    await moderation.resume(deps, HERE, MOD)
    turn = (await players.act(deps, HERE, ALICE, WALK)).turn
    with pytest.raises(TurnNotFound):  # a turn of another channel
        await moderation.cancel(deps, ELSEWHERE, MOD, turn_id=turn.id)
    cancelled = await moderation.cancel(deps, HERE, MOD, seq=1, reason="dup")
    row = await _row(sessions, cancelled.id)
    assert (cancelled.id, row.status, row.error, row.cancelled_by_name, row.cancel_note) == (
        turn.id, "cancelled", "cancelled_by_moderator", MOD.name, "dup")
    assert await _jobs(sessions) == ["cancelled"]
    with pytest.raises(PlayerNotInGame):
        await moderation.kick(deps, HERE, MOD, Member(5, "eve"))
    _gs, p = await moderation.kick(deps, HERE, MOD, BOB)
    assert p.character_id == "jiji"
    with pytest.raises(NoSession):
        await moderation.resume(deps, ELSEWHERE, MOD)
    async with sessions() as s:
        actions = (await s.scalars(select(AuditLog.action).order_by(AuditLog.id))).all()
    assert list(actions) == ["set_film", "pause", "resume", "cancel_turn", "kick"]


async def test_vote_mode_from_proposals_to_the_winning_turn(deps, sessions, rounds_due):
    await _playing(deps)
    await voting.set_mode(deps, HERE, MOD, True, 60)
    with pytest.raises(VoteModeOn):
        await players.act(deps, HERE, ALICE, WALK)
    with pytest.raises(InputRefused):  # a member playing no character gives a name
        await voting.propose(deps, HERE, Member(3), ActFields("walk", "town", others=["Qiqi"]))
    first = await voting.propose(deps, HERE, Member(3, "cy"), ActFields("walk", "town", others=["Qiqi"]))
    second = await voting.propose(deps, HERE, Member(BOB.id), WALK)  # a player: the name they joined with
    assert (first.option, second.option) == (1, 2) and first.round.id == second.round.id
    assert (await voting.vote_for_option(deps, HERE, 2, ALICE.id))[1] == 2
    assert await voting.close_due(deps, [HERE.guild_id]) == []  # not due yet
    await rounds_due()
    (closed,) = await voting.close_due(deps, [HERE.guild_id], shown=True)
    assert closed.turn is not None and (await _row(sessions, closed.turn.id)).author_name == "bob" and closed.position == 1
    async with sessions() as s:
        rnd = await s.get(VoteRound, closed.round.id)
        assert rnd is not None and rnd.status == "closed" and rnd.result_shown_at is not None
        assert await s.scalar(select(func.count()).select_from(Turn)) == 1


async def test_a_turns_author_or_a_moderator_cancels_or_regenerates_it(deps, sessions):
    await _playing(deps)
    first = (await players.act(deps, HERE, ALICE, WALK)).turn
    with pytest.raises(NotTurnAuthor):  # bob's button on alice's turn
        await moderation.cancel_own(deps, HERE, BOB, first.id, moderator=False)
    own = await _row(sessions, (await moderation.cancel_own(deps, HERE, ALICE, first.id, moderator=False)).id)
    assert (own.status, own.error, own.cancelled_by_name) == ("cancelled", "cancelled_by_author", ALICE.name)
    second = (await players.act(deps, HERE, BOB, WALK)).turn
    with pytest.raises(TurnNotFinished):
        await moderation.regenerate(deps, HERE, BOB, second.id, moderator=False)
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == second.id).values(status="done", status_message_id=77))
    done = await moderation.regenerate(deps, HERE, MOD, second.id, moderator=True)
    assert (done.turn.id, (await _row(sessions, done.turn.id)).status, done.old_message, done.position) == (
        second.id, "queued", 77, 1)
    async with sessions() as s:
        actions = (await s.scalars(select(AuditLog.action).order_by(AuditLog.id))).all()
    assert list(actions) == ["set_film", "regenerate_turn"]  # the author's own cancel is not audited
