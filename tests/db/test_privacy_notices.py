"""The one-time notices a member was shown (member_notices) in /privacy show's counts and gone
with /privacy delete, against a real Postgres."""

from __future__ import annotations

from sqlalchemy import select

from db import notices, privacy
from db.models import MemberNotice, PrivacyRequest
from tests.db.test_privacy import ALICE, BOB, G1, _world

CAROL = 717171717171  # was shown a notice, never played


async def test_show_counts_the_notices_everywhere(sessions):
    await _world(sessions)
    async with sessions.begin() as s:
        assert await notices.first_time(s, ALICE, "english-model")
        assert await notices.first_time(s, CAROL, "english-model")
    async with sessions() as s:
        mine = await privacy.stored(s, ALICE, G1)
        carols = await privacy.stored(s, CAROL, G1)
    assert mine.here == privacy.Counts(games=1, turns=2, clips=2, votes=4, audit=3)  # a notice is in no server
    assert mine.everywhere == privacy.Counts(games=2, turns=3, clips=3, votes=4, audit=3, notices=1)
    assert carols.here.empty and not carols.everywhere.empty and carols.everywhere.notices == 1 and carols.servers == 0


async def test_delete_removes_the_member_s_notices_only(sessions):
    await _world(sessions)
    async with sessions.begin() as s:
        for member in (ALICE, BOB, CAROL):
            await notices.first_time(s, member, "english-model")
        alice_req, _ = await privacy.request_deletion(s, ALICE)
        carol_req, _ = await privacy.request_deletion(s, CAROL)
    assert await privacy.process(sessions, alice_req.id) == privacy.STEPS
    assert await privacy.process(sessions, carol_req.id) == privacy.STEPS  # nothing but the notice: done too
    async with sessions() as s:
        left = (await s.execute(select(MemberNotice.user_id, MemberNotice.notice))).all()
        assert [tuple(r) for r in left] == [(BOB, "english-model")]  # alice's and carol's gone, bob's kept
        assert (await privacy.stored(s, ALICE, G1)).everywhere.empty and (await privacy.stored(s, CAROL, G1)).everywhere.empty
        statuses = (await s.scalars(select(PrivacyRequest.status).where(PrivacyRequest.id.in_([alice_req.id, carol_req.id])))).all()
        assert list(statuses) == ["done", "done"]
    async with sessions.begin() as s:  # a deleted member is told again the next time it applies
        assert await notices.first_time(s, ALICE, "english-model")
