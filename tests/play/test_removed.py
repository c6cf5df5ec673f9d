"""A shot taken down (db.removal.take_down_turns, as /mod remove and members' privacy requests do)
is gone from the play page: the turn list, the turn itself and its clip; the page hears it."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import select, update

from db import removal
from db.models import Turn
from tests.play.test_api import A, app, get, post, start_and_join  # noqa: F401  (app: the fixture)


async def test_a_removed_turn_is_gone_from_the_page(app, http, sessions):  # noqa: F811
    base, _ = app
    await start_and_join(http, base)
    for motion in ("walk", "run"):
        assert (await post(http, f"{base}/api/act", {"player_id": A, "motion": motion, "background": "town"}))[0] == 200
    async with sessions() as s, s.begin():  # both finished with a clip, as a worker leaves them
        await s.execute(update(Turn).values(status="done", mp4=b"\x00\x00\x00\x18ftypmp42" + b"x" * 100, mp4_size=112))
        first, second = (await s.scalars(select(Turn).order_by(Turn.seq))).all()
    _, listing = await get(http, f"{base}/api/turns")
    assert [t["seq"] for t in listing["turns"]] == [1, 2] and listing["turns"][0]["video"]

    async with http.get(f"{base}/api/events") as stream:
        async with sessions() as s, s.begin():
            assert await removal.take_down_turns(s, [first.id], note="spoilers", by_id=42, by_name="mod") == [first.id]
        heard = []
        while not any(e.get("event") == "removed" for e in heard):
            line = await asyncio.wait_for(stream.content.readline(), 10)
            if line.startswith(b"data: "):
                heard.append(json.loads(line[6:]))

    _, listing = await get(http, f"{base}/api/turns")
    assert [t["seq"] for t in listing["turns"]] == [2]
    status, body = await get(http, f"{base}/api/turns/{first.id}")
    assert status == 404 and body["message"] == "This turn was removed."
    async with http.get(f"{base}/api/turns/{first.id}/video.mp4") as r:
        assert r.status == 404
    async with http.get(f"{base}/api/turns/{second.id}/video.mp4") as r:
        assert r.status == 200
    async with sessions() as s:  # idempotent: a second take-down changes nothing
        async with s.begin():
            assert await removal.take_down_turns(s, [first.id, 10**30], note="again", by_id=None, by_name=None) == []
        row = await s.get(Turn, first.id)
        assert (row.instruction, row.motion, row.removed_reason, row.removed_note, row.removed_by_name) == (
            "", "", "remover_words", "spoilers", "mod")
