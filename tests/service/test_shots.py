"""The turn behind a message and a member's report of it (service.shots) against a real Postgres:
what "Remove shot" and "Report shot" find, the refusals in the order they are said, and the
report's audit entry."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from db.models import AuditLog, Turn
from game.shot_errors import NoLogChannel, NotAShot, ShotAlreadyRemoved
from service import admin, players, shots
from service.game import Game, Member, Place
from service.jobs import QueueJobs
from service.players import ActFields

HERE = Place(100, 200)
ALICE, BOB, MOD = Member(1, "alice"), Member(2, "bob"), Member(9, "mod")
POST, STATUS = 7001, 7002


@pytest.fixture
def game(sessions, settings) -> Game:
    return Game(settings, sessions, QueueJobs())


async def _posted(game: Game, sessions) -> Turn:
    """Alice's turn, finished and posted (POST), after its status message (STATUS)."""
    await admin.set_film(game, HERE, MOD, "qiqi")
    await players.start(game, HERE, ALICE)
    await players.join(game, HERE, ALICE, "qiqi")
    turn = (await players.act(game, HERE, ALICE, ActFields("walk", "town"))).turn
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == turn.id)
                        .values(status="done", posted_message_id=POST, status_message_id=STATUS))
    return turn


async def test_the_turn_behind_its_post_or_status_message_in_this_server_only(game, sessions):
    turn = await _posted(game, sessions)
    assert (await shots.shot_by_message(game, HERE.guild_id, POST)).id == turn.id
    assert (await shots.shot_by_message(game, HERE.guild_id, STATUS)).id == turn.id
    for guild_id, message_id in ((HERE.guild_id, 1234), (HERE.guild_id + 1, POST), (HERE.guild_id, 2**70)):
        with pytest.raises(NotAShot):  # another message, another server's, an id no message has
            await shots.shot_by_message(game, guild_id, message_id)


async def test_a_report_needs_a_shot_still_up_and_a_log_channel_and_is_audited(game, sessions):
    turn = await _posted(game, sessions)
    with pytest.raises(NotAShot):
        await shots.reportable(game, HERE.guild_id, 1234)
    with pytest.raises(NoLogChannel):
        await shots.reportable(game, HERE.guild_id, POST)
    await admin.set_log_channel(game, HERE, MOD, 555)
    found = await shots.reportable(game, HERE.guild_id, POST)
    await shots.report(game, HERE, BOB, found, POST)
    async with sessions() as s:
        entry = (await s.scalars(select(AuditLog).where(AuditLog.action == "report_shot"))).one()
    assert (entry.guild_id, entry.channel_id, entry.actor_id, entry.actor_name, entry.target) == (100, 200, 2, "bob", "1")
    assert entry.details == {"turn_id": turn.id, "author_id": "1", "author": "alice", "game_channel_id": "200",
                             "message_id": str(POST)}
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == turn.id).values(removed_at=turn.created_at))
    with pytest.raises(ShotAlreadyRemoved):  # said before the missing log channel would be
        await shots.reportable(game, HERE.guild_id, POST)
