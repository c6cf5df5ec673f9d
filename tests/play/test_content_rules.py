"""The play page applies the operator's content rules (it has no server, so no filter or AutoMod)
to a turn's instruction: refused with the same words as Discord, and nothing is queued."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from db.models import Turn
from game.content_rules import OPERATOR, RuleSet
from game.operator_rules import use_rules
from tests.play.conftest import running_app
from tests.play.test_api import A, post, start_and_join


@pytest.fixture
async def app(settings, engine, database_url, sessions):
    use_rules(RuleSet.of(OPERATOR, ["*dragon*"]))
    try:
        async with running_app(settings, engine, database_url) as (base, svc):
            yield base, svc
    finally:
        use_rules(None)


async def test_the_page_refuses_an_operator_blocked_instruction(app, http, sessions):
    base, _ = app
    await start_and_join(http, base)
    status, r = await post(http, f"{base}/api/act", {"player_id": A, "motion": "ride a ＤＲＡＧＯＮ", "background": "sky"})
    assert status == 409, r
    assert r == {"error": "content_refused", "message": "Your instruction was refused by the operator's rules. Please rephrase it and try again.",
                 "params": {"what": "instruction", "rule_set": "operator"}}
    async with sessions() as s:
        assert (await s.scalars(select(Turn))).all() == []
    status, r = await post(http, f"{base}/api/act", {"player_id": A, "motion": "fly", "background": "sky"})
    assert status == 200, r
