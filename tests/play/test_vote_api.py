"""The play page's vote mode over a real Postgres: the same rounds as Discord's /vote."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlalchemy import func, select, text, update

from db.models import Turn, VoteRound
from testkit.waits import wait_for
from tests.play.conftest import running_app
from tests.play.test_api import A, B, get, post, start_and_join

C = 3333  # a tab that never joins


@pytest.fixture
async def app(settings, engine, database_url, sessions):
    async with running_app(settings, engine, database_url) as (base, svc):
        yield base, svc


async def wait_round(http, base, status: str, player: int = A, timeout: float = 10.0) -> dict:
    async def found():
        _, v = await get(http, f"{base}/api/vote?player={player}")
        return v["round"] if v["round"] and v["round"]["status"] == status else None

    return await wait_for(found, timeout, interval=0.1, what=f"a {status} round")


async def expire(sessions) -> None:
    async with sessions.begin() as s:
        await s.execute(update(VoteRound).where(VoteRound.status == "open").values(deadline=func.now() - text("interval '1 second'")))


async def test_vote_rounds_on_the_page(app, http, sessions):
    base, _ = app
    await start_and_join(http, base)
    _, v = await get(http, f"{base}/api/vote")
    assert v == {"enabled": False, "round_seconds": 120, "round": None}
    status, r = await post(http, f"{base}/api/vote/propose", {"player_id": C, "name": "Cy", "motion": "walk", "background": "town", "characters": ["Qiqi"]})
    assert status == 409 and r["error"] == "vote_mode_off"

    assert (await post(http, f"{base}/api/vote/mode", {"enabled": True, "seconds": 5}))[1]["error"] == "refused"
    assert (await post(http, f"{base}/api/vote/mode", {"enabled": True, "seconds": "60"}))[0] == 400
    status, r = await post(http, f"{base}/api/vote/mode", {"enabled": True, "seconds": 600})
    assert status == 200 and r == {"ok": True, "enabled": True, "round_seconds": 600}
    status, r = await post(http, f"{base}/api/act", {"player_id": A, "motion": "walk", "background": "town"})
    assert status == 409 and r["error"] == "vote_mode"

    # A tab that has not joined proposes with a name and the characters in the shot; a player's
    # proposal has their own character.
    status, r = await post(http, f"{base}/api/vote/propose", {"player_id": C, "motion": "walk", "background": "town", "characters": ["Qiqi"]})
    assert status == 400 and r["field"] == "name"
    status, r = await post(http, f"{base}/api/vote/propose", {"player_id": C, "name": "Cy", "motion": "fly on broomstick", "background": "sky", "characters": ["Qiqi", "Jiji"]})
    assert status == 200 and r["option"] == 1 and r["instruction"] == "Character: Qiqi, Jiji; Motion: fly on broomstick; Background: sky."
    status, r = await post(http, f"{base}/api/vote/propose", {"player_id": A, "motion": "walk", "background": "town"})
    assert status == 200 and r["option"] == 2 and r["instruction"].startswith("Character: Qiqi; Motion: walk")
    status, r = await post(http, f"{base}/api/vote/propose", {"player_id": A, "motion": "run", "background": "town"})
    assert status == 409 and r["error"] == "already_proposed"
    status, r = await post(http, f"{base}/api/vote/ballot", {"player_id": C, "option": 3})
    assert status == 409 and r["error"] == "unknown_proposal"
    assert (await post(http, f"{base}/api/vote/ballot", {"player_id": C, "option": "1"}))[0] == 400

    # Votes move; the last joined player's vote closes the round at once.
    assert (await post(http, f"{base}/api/vote/ballot", {"player_id": C, "option": 2}))[1]["option"] == 2
    assert (await post(http, f"{base}/api/vote/ballot", {"player_id": C, "option": 1}))[1]["option"] == 1
    await post(http, f"{base}/api/vote/ballot", {"player_id": A, "option": 2})
    rnd = await wait_round(http, base, "open", player=C)
    assert rnd["my_vote"] == 1 and [o["votes"] for o in rnd["options"]] == [1, 1]
    assert (rnd["players"], rnd["players_voted"], rnd["voters"]) == (2, 1, 2) and 590 < rnd["seconds_left"] <= 600
    await post(http, f"{base}/api/vote/ballot", {"player_id": B, "option": 1})
    rnd = await wait_round(http, base, "closed")
    assert rnd["outcome"] == "Option 1 won with 2 votes: it is turn #1." and rnd["options"][0]["winner"]
    async with sessions() as s:
        (turn,) = (await s.scalars(select(Turn))).all()
    assert (turn.author_id, turn.author_name, turn.id) == (C, "Cy", rnd["turn_id"])
    status, r = await post(http, f"{base}/api/vote/ballot", {"player_id": C, "option": 1})
    assert status == 409 and r["error"] == "no_round"

    # The deadline, checked by the page's own task; an empty round; a pause voids the round.
    await post(http, f"{base}/api/vote/propose", {"player_id": B, "motion": "walk", "background": "town"})
    await expire(sessions)
    rnd = await wait_round(http, base, "closed")
    assert rnd["outcome"] == "Option 1 won with 0 votes: it is turn #2."
    assert (await post(http, f"{base}/api/vote/open", {"player_id": C}))[1]["created"] is True
    await expire(sessions)
    empty = await wait_round(http, base, "closed")
    assert (empty["outcome"], empty["outcome_code"]) == ("Nobody proposed an action: no turn this round.", "no_proposals")
    await post(http, f"{base}/api/vote/propose", {"player_id": B, "motion": "walk", "background": "town"})
    await post(http, f"{base}/api/pause", {"paused": True})
    rnd = await wait_round(http, base, "void")
    assert "paused" in rnd["outcome"] and rnd["outcome_code"] == "voided_pause"
    async with http.get(f"{base}/api/vote?player={A}", headers={"Accept-Language": "ja"}) as r:  # the same row, in Japanese
        ja = await r.json()
    assert (ja["round"]["outcome"], ja["round"]["outcome_code"]) == (
        "ゲームが一時停止されたため、このラウンドは無効となり、ターンは行われませんでした。", "voided_pause")
    status, r = await post(http, f"{base}/api/vote/propose", {"player_id": B, "motion": "walk", "background": "town"})
    assert status == 409 and r["error"] == "paused"
    async with sessions() as s:
        assert (await s.scalar(select(func.count()).select_from(Turn))) == 2


async def test_round_changes_reach_the_event_stream(app, http, sessions):
    base, _ = app
    await start_and_join(http, base)
    await post(http, f"{base}/api/vote/mode", {"enabled": True})
    got: list[dict] = []

    async def read():
        async with http.get(f"{base}/api/events") as r:
            async for line in r.content:
                if line.startswith(b"data: "):
                    got.append(json.loads(line[6:]))
                    if got[-1].get("event") == "vote":
                        return

    reader = asyncio.create_task(read())
    await wait_for(lambda: got, timeout=10, what="the stream's hello (its subscription is made)")
    await post(http, f"{base}/api/vote/propose", {"player_id": A, "motion": "walk", "background": "town"})
    await asyncio.wait_for(reader, 10)
    assert got[-1]["type"] == "session_changed" and got[-1]["channel_id"] == 1
