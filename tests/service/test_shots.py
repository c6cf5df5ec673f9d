"""The turn behind a message, a member's report of it and taking it down (service.shots) against a
real Postgres: what "Remove shot" and "Report shot" find, the refusals in the order they are said,
the removal stored with its remover's words, and the audit entries."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from db.models import AuditLog, Turn
from db.privacy import DELETED_NAME
from game.shot_errors import NoLogChannel, NotAShot, NotShotAuthor, ShotAlreadyRemoved, ShotNotFinished
from game.stored_reasons import REMOVER_WORDS
from i18n import use_locale
from service import admin, players, shots
from service.deps import Deps, Member, Place
from service.players import ActFields
from service.results import TurnRef

HERE = Place(100, 200)
ALICE, BOB, MOD = Member(1, "alice"), Member(2, "bob"), Member(9, "mod")
POST, STATUS = 7001, 7002


async def _posted(deps: Deps, sessions) -> TurnRef:
    """Alice's turn, finished and posted (POST), after its status message (STATUS)."""
    await admin.set_film(deps, HERE, MOD, "qiqi")
    await players.start(deps, HERE, ALICE)
    await players.join(deps, HERE, ALICE, "qiqi")
    turn = (await players.act(deps, HERE, ALICE, ActFields("walk", "town"))).turn
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == turn.id)
                        .values(status="done", posted_message_id=POST, status_message_id=STATUS))
    return turn


async def test_the_turn_behind_its_post_or_status_message_in_this_server_only(deps, sessions):
    turn = await _posted(deps, sessions)
    assert (await shots.shot_by_message(deps, HERE.guild_id, POST)).id == turn.id
    assert (await shots.shot_by_message(deps, HERE.guild_id, STATUS)).id == turn.id
    for guild_id, message_id in ((HERE.guild_id, 1234), (HERE.guild_id + 1, POST), (HERE.guild_id, 2**70)):
        with pytest.raises(NotAShot):  # another message, another server's, an id no message has
            await shots.shot_by_message(deps, guild_id, message_id)


async def test_a_report_needs_a_shot_still_up_and_a_log_channel_and_is_audited(deps, sessions):
    turn = await _posted(deps, sessions)
    with pytest.raises(NotAShot):
        await shots.reportable(deps, HERE.guild_id, 1234)
    with pytest.raises(NoLogChannel):
        await shots.reportable(deps, HERE.guild_id, POST)
    await admin.set_log_channel(deps, HERE, MOD, 555)
    found = await shots.reportable(deps, HERE.guild_id, POST)
    await shots.report(deps, HERE, BOB, found, POST)
    async with sessions() as s:
        entry = (await s.scalars(select(AuditLog).where(AuditLog.action == "report_shot"))).one()
    assert (entry.guild_id, entry.channel_id, entry.actor_id, entry.actor_name, entry.target) == (100, 200, 2, "bob", "1")
    assert entry.details == {"turn_id": turn.id, "author_id": "1", "author": "alice", "game_channel_id": "200",
                             "message_id": str(POST)}
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == turn.id).values(removed_at=func.now()))
    with pytest.raises(ShotAlreadyRemoved):  # said before the missing log channel would be
        await shots.reportable(deps, HERE.guild_id, POST)


async def _entries(sessions, action: str) -> list[AuditLog]:
    async with sessions() as s:
        return list(await s.scalars(select(AuditLog).where(AuditLog.action == action)))


async def _stored(sessions, turn_id: int) -> Turn:
    async with sessions() as s:
        turn = await s.get(Turn, turn_id)
        assert turn is not None
        return turn


async def test_a_removal_is_refused_in_order_and_a_refusal_changes_nothing(deps, sessions):
    await admin.set_film(deps, HERE, MOD, "qiqi")
    await players.start(deps, HERE, ALICE)
    await players.join(deps, HERE, ALICE, "qiqi")
    queued = (await players.act(deps, HERE, ALICE, ActFields("walk", "town"))).turn
    with pytest.raises(NotAShot):
        await shots.remove(deps, HERE, MOD, queued.id + 1000, "spoilers", moderator=True, via="/mod remove")
    with pytest.raises(NotShotAuthor) as refused:  # someone else's shot, before whether it is finished
        await shots.remove(deps, HERE, BOB, queued.id, "spoilers", moderator=False, via="Remove shot")
    assert refused.value.params["author"] == "alice"
    with pytest.raises(ShotNotFinished):
        await shots.remove(deps, HERE, ALICE, queued.id, "oops", moderator=False, via="Remove shot")
    with pytest.raises(ShotNotFinished):
        await shots.remove(deps, HERE, MOD, queued.id, "spoilers", moderator=True, via="/mod remove")
    stored = await _stored(sessions, queued.id)
    assert (stored.removed_at, stored.removed_note, stored.removed_by_id) == (None, None, None)
    assert await _entries(sessions, "remove_shot") == []


async def test_the_author_takes_their_shot_down_once_and_it_is_audited(deps, sessions):
    turn = await _posted(deps, sessions)
    done = await shots.remove(deps, HERE, ALICE, turn.id, "my mistake", moderator=False, via="Remove shot")
    assert (done.seq, done.guild_id, done.channel_id, done.message_id, done.by_author) == (1, 100, 200, POST, True)
    stored = await _stored(sessions, turn.id)
    assert stored.removed_at is not None  # the notice is drawn from it (service.posting.taken_down)
    assert (stored.removed_reason, stored.removed_note, stored.removed_by_id, stored.removed_by_name) == (
        REMOVER_WORDS, "my mistake", 1, "alice")
    [entry] = await _entries(sessions, "remove_shot")
    assert (entry.guild_id, entry.channel_id, entry.actor_id, entry.actor_name, entry.target) == (100, 200, 1, "alice", "1")
    assert entry.details == {"turn_id": turn.id, "reason": "my mistake", "by": "author", "via": "Remove shot",
                             "author_id": "1", "author": "alice", "game_channel_id": "200", "message_id": str(POST)}
    for who, moderator in ((ALICE, False), (MOD, True)):
        with pytest.raises(ShotAlreadyRemoved):
            await shots.remove(deps, HERE, who, turn.id, "again", moderator=moderator, via="/mod remove")
    assert len(await _entries(sessions, "remove_shot")) == 1


async def test_a_moderator_takes_down_anyones_shot_seen_by_its_status_message(deps, sessions):
    turn = await _posted(deps, sessions)
    async with sessions.begin() as s:  # not posted yet: its status message is what shows it
        await s.execute(update(Turn).where(Turn.id == turn.id).values(status="failed", posted_message_id=None))
    done = await shots.remove(deps, HERE, MOD, turn.id, "spoilers", moderator=True, via="/mod remove")
    assert (done.message_id, done.by_author) == (STATUS, False)
    stored = await _stored(sessions, turn.id)
    assert (stored.removed_note, stored.removed_by_id, stored.removed_by_name) == ("spoilers", 9, "mod")
    [entry] = await _entries(sessions, "remove_shot")
    assert (entry.actor_id, entry.actor_name, entry.target) == (9, "mod", "1")
    assert entry.details == {"turn_id": turn.id, "reason": "spoilers", "by": "moderator", "via": "/mod remove",
                             "author_id": "1", "author": "alice", "game_channel_id": "200", "message_id": str(STATUS)}


async def test_a_refusal_names_a_stand_in_author_in_the_readers_language(deps, sessions):
    """A deleted member's shot: the refusal names the stand-in the database keeps ("deleted
    member") in the language it is shown in, not the English stored."""
    turn = await _posted(deps, sessions)
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == turn.id).values(author_name=DELETED_NAME))
    with pytest.raises(NotShotAuthor) as refused:
        await shots.remove(deps, HERE, BOB, turn.id, "spoilers", moderator=False, via="Remove shot")
    with use_locale("ja"):
        assert "削除済みメンバー" in refused.value.message
    with use_locale("en"):
        assert "Only deleted member (who asked for this shot)" in refused.value.message
