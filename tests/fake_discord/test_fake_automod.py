"""The fake's AutoMod rules against the real discord.py client: the list route (Manage Server
needed, as on Discord) and the AUTO_MODERATION_RULE_* events parsed into AutoModRule objects."""

from __future__ import annotations

import discord
import pytest

from testkit.fake_discord import FakeDiscord
from testkit.fake_discord.tinybot import TinyBot, World


async def test_rules_listed_with_manage_server_and_events_dispatched(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    seen: list[tuple[str, str, list[str]]] = []

    async def record(kind: str, rule: discord.AutoModRule) -> None:
        seen.append((kind, rule.name, rule.trigger.keyword_filter))

    async def on_automod_rule_create(rule):
        await record("create", rule)

    async def on_automod_rule_update(rule):
        await record("update", rule)

    async def on_automod_rule_delete(rule):
        await record("delete", rule)

    for listener in (on_automod_rule_create, on_automod_rule_update, on_automod_rule_delete):
        bot.add_listener(listener)
    guild = bot.get_guild(world.guild.id)
    assert guild is not None

    with pytest.raises(discord.Forbidden):  # the bot lacks Manage Server
        await guild.fetch_automod_rules()
    bot_role = next(r for r in world.guild.roles.values() if r.bot_id)
    world.guild.edit_role(bot_role, permissions=bot_role.permissions | discord.Permissions(manage_guild=True).value)

    rule = fake_discord.create_automod_rule(world.guild, "Words", keywords=["*bad*"], allow=["badge"])
    (fetched,) = await guild.fetch_automod_rules()
    assert fetched.name == "Words" and fetched.trigger.type is discord.AutoModRuleTriggerType.keyword
    assert fetched.trigger.keyword_filter == ["*bad*"] and fetched.trigger.allow_list == ["badge"] and fetched.enabled

    fake_discord.edit_automod_rule(world.guild, rule, keywords=["worse"])
    fake_discord.delete_automod_rule(world.guild, rule)
    await fake_discord.wait_until(lambda: len(seen) == 3, 2, "three AutoMod events")
    assert seen == [("create", "Words", ["*bad*"]), ("update", "Words", ["worse"]), ("delete", "Words", ["worse"])]
    assert await guild.fetch_automod_rules() == []
