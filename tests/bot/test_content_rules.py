"""Content rules through the real bot on the fake Discord: the operator's rules, the server's
filter (/admin filter) and the server's AutoMod keyword rules refuse /act, /vote propose and
moderators' reasons with the refusing rule set named; a refusal queues nothing, costs no cooldown
and is audited; a refused display name is shown as "a player"."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select

from db.models import AuditLog, ContentFilterTerm, VoteProposal
from game.content_rules import MAX_TERMS, OPERATOR, RuleSet
from game.operator_rules import use_rules
from testkit.queue import wait_until
from tests.bot.helpers import say, setup_game, turns_of


@pytest.fixture
def operator_rules():
    """The operator's rules for one test: blocks `*dragon*` (the packaged list comes back after)."""
    use_rules(RuleSet.of(OPERATOR, ["*dragon*", "lava"]))
    yield
    use_rules(None)


def refused_by(rule_set: str, what: str = "instruction") -> str:
    return f"Your {what} was refused by {rule_set}. Please rephrase it and try again."


async def audited(sessions, action: str, n: int = 1) -> list[AuditLog]:
    async def found():
        async with sessions() as s:
            rows = list((await s.scalars(select(AuditLog).where(AuditLog.action == action).order_by(AuditLog.id))).all())
        return rows if len(rows) >= n else None

    return await wait_until(found, timeout=5)


async def test_operator_rule_refuses_act_without_cooldown_and_is_audited(world, start_bot, sessions, operator_rules):
    w = world
    await start_bot()
    slayer = w.guild.create_member("DragonSlayer")
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, slayer, "game start")
    await w.server.wait_for_message(w.games, lambda m: m.content.startswith("a player started a game"))  # a refused name
    await setup_game(w, (w.alice, "qiqi"), (slayer, "jiji"))
    await w.server.wait_for_message(w.games, lambda m: m.content == "a player plays Jiji.")  # a refused name
    assert "Limits: cooldown 600 s" in await say(w, w.erin, "admin limits", {"cooldown": 600})

    for motion in ("fight a DRAGON", "fight a ｄｒａｇｏｎ", "fight a dra\u200bgon"):  # case, full-width, zero-width
        text = await say(w, w.alice, "act", {"motion": motion, "background": "sky"})
        assert text == refused_by("the operator's rules"), text
    assert await turns_of(sessions) == []  # nothing queued
    (entry, *_) = await audited(sessions, "instruction_refused", 3)
    assert entry.actor_id == w.alice.id and entry.target == "/act"
    assert entry.details == {"rule_set": "operator", "term": "*dragon*", "text": "fight a DRAGON | sky"}  # a code, not a name

    # The refusals took no cooldown: the next turn is queued at once, and that one does.
    assert "is queued" in await say(w, w.alice, "act", {"motion": "fly", "background": "sky"})
    assert "Slow down" in await say(w, w.alice, "act", {"motion": "fly", "background": "sky"})

    # A display name the rules refuse is shown as "a player"; the turn goes ahead.
    assert "is queued" in await say(w, slayer, "act", {"motion": "walk", "background": "town"})
    assert [t.author_name for t in await turns_of(sessions)] == ["alice", "a player"]


async def test_admin_filter_add_list_remove_and_bounds(world, start_bot, sessions):
    w = world
    await start_bot()
    await setup_game(w)
    assert await say(w, w.erin, "admin filter list") == "This server's filter is empty. Add a term with /admin filter add."
    assert await say(w, w.erin, "admin filter add", {"term": "Walk*"}) == "Blocked here from now on: walk\\*"
    assert await say(w, w.erin, "admin filter add", {"term": "dark forest"}) == "Blocked here from now on: dark forest"
    assert await say(w, w.erin, "admin filter list") == "This server's filter (2 terms):\nwalk\\*\ndark forest"

    assert "'walk\\*' is already in this server's filter" in await say(w, w.erin, "admin filter add", {"term": "WALK*"})
    assert "may hold a \\* only at its start or end" in await say(w, w.erin, "admin filter add", {"term": "wa*lk"})
    assert "is too long (61 characters; at most 60)" in await say(w, w.erin, "admin filter add", {"term": "x" * 61})
    assert "You need the Manage Server permission" in await say(w, w.carol, "admin filter add", {"term": "fly"})

    assert await say(w, w.alice, "act", {"motion": "walking", "background": "sky"}) == refused_by("this server's filter")
    assert await say(w, w.alice, "act", {"motion": "fly", "background": "a Dark  Forest"}) == refused_by("this server's filter")
    assert await say(w, w.alice, "act", {"motion": "sidewalk", "background": "sky"}) != refused_by("this server's filter")

    assert await say(w, w.erin, "admin filter remove", {"term": "walk*"}) == "No longer blocked: walk\\*"
    assert "'walk\\*' is not in this server's filter" in await say(w, w.erin, "admin filter remove", {"term": "walk*"})
    assert "is queued" in await say(w, w.alice, "act", {"motion": "walking", "background": "sky"})
    assert [e.target for e in await audited(sessions, "filter_add", 2)] == ["walk*", "dark forest"]

    # AutoMod's bound: 1,000 terms per server.
    async with sessions.begin() as s:
        await s.execute(insert(ContentFilterTerm), [
            {"guild_id": w.guild.id, "term": f"term{i}", "added_by": w.erin.id} for i in range(MAX_TERMS - 2)
        ])
    assert "Blocked here" in await say(w, w.erin, "admin filter add", {"term": "last"})
    full = await say(w, w.erin, "admin filter add", {"term": "one more"})
    assert full.startswith("This server's filter already holds 1,000 terms"), full
    h = await w.server.slash(w.guild, w.games, w.erin, "admin filter list", {})
    listed = await h.wait_followup(timeout=10)
    assert listed.content == "This server's filter (1,000 terms):" and listed.attachments[0].filename == "filter.txt"
    assert listed.attachments[0].data.decode().splitlines()[-1] == "last"


def bot_role(w):
    return next(r for r in w.guild.roles.values() if r.bot_id)


async def test_automod_keyword_rules_read_refreshed_and_allow_list(world, start_bot, sessions):
    w = world
    server = w.server
    w.guild.edit_role(bot_role(w), permissions=bot_role(w).permissions | (1 << 5))  # Manage Server
    rule = server.create_automod_rule(w.guild, "No spoilers", keywords=["*ending*"], allow=["pending"])
    server.create_automod_rule(w.guild, "Patterns", regex=["b(a+)+d"])  # regex only: skipped
    server.create_automod_rule(w.guild, "Off", keywords=["fly"], enabled=False)
    server.create_automod_rule(w.guild, "Exempt here", keywords=["sky"], exempt_channels=(w.games,))
    bot = await start_bot()
    await setup_game(w)

    automod = "this server's AutoMod rule No spoilers"
    assert await say(w, w.alice, "act", {"motion": "the Ending", "background": "town"}) == refused_by(automod)
    assert "is queued" in await say(w, w.alice, "act", {"motion": "fly", "background": "pending sky"})  # allow list, exemptions
    assert len(server.requests_to("GET", "/guilds/{guild_id}/auto-moderation/rules")) == 1  # read once, then cached

    server.edit_automod_rule(w.guild, rule, keywords=["twist"])
    cached = bot.automod._rules[w.guild.id]  # rule id -> rule, kept current by the gateway events
    await server.wait_until(lambda: cached[int(rule["id"])].rules.terms == ("twist",), timeout=5)
    assert await say(w, w.alice, "act", {"motion": "plot twist", "background": "town"}) == refused_by(automod)
    assert "is queued" in await say(w, w.alice, "act", {"motion": "the ending", "background": "town"})
    server.delete_automod_rule(w.guild, rule)
    await server.wait_until(lambda: int(rule["id"]) not in cached, timeout=5)
    assert "is queued" in await say(w, w.alice, "act", {"motion": "plot twist", "background": "town"})
    assert len(server.requests_to("GET", "/guilds/{guild_id}/auto-moderation/rules")) == 1  # events, not reads


async def test_automod_without_manage_server_is_skipped(world, start_bot, sessions):
    w = world
    w.server.create_automod_rule(w.guild, "No spoilers", keywords=["ending"])
    await start_bot()
    await setup_game(w)
    assert "is queued" in await say(w, w.alice, "act", {"motion": "the ending", "background": "town"})
    assert w.server.requests_to("GET", "/guilds/{guild_id}/auto-moderation/rules") == []


async def test_vote_propose_and_mod_reasons_are_refused(world, start_bot, sessions, operator_rules):
    w = world
    await start_bot()
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start")
    await say(w, w.alice, "game join", {"character": "qiqi"})
    assert "Vote mode is on" in await say(w, w.erin, "vote mode", {"enabled": True, "seconds": 600})

    text = await say(w, w.alice, "vote propose", {"motion": "ride a dragon", "background": "sky"})
    assert text == refused_by("the operator's rules")
    async with sessions() as s:
        assert (await s.scalars(select(VoteProposal))).all() == []
    assert (await audited(sessions, "instruction_refused"))[0].target == "/vote propose"
    assert "Your proposal is option 1" in await say(w, w.alice, "vote propose", {"motion": "fly", "background": "sky"})

    assert await say(w, w.dave, "mod pause", {"reason": "lava"}) == refused_by("the operator's rules", "reason")
    assert (await audited(sessions, "reason_refused"))[0].details["text"] == "lava"
    assert await say(w, w.dave, "mod pause", {"reason": "a break"}) == "The game is paused."
