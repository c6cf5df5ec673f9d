"""A server's own AutoMod keyword rules, applied to what members type for the game.

Discord's AutoMod filters messages, not slash-command options, so the bot applies the server's
enabled keyword rules (trigger type 1: `keyword_filter` and `allow_list`) to instructions, vote
proposals, moderators' reasons and the display names shown in posts, as
"this server's AutoMod rule <name>". A rule's exempt roles and channels are honoured.
`regex_patterns` are skipped: Python's `re` backtracks, so a pattern's cost cannot be bounded
(Discord runs them with Rust's linear-time engine).

The rules are read with `Guild.fetch_automod_rules()` (Manage Server is needed; the bot does not
ask for it in its invite, so a server grants it when it wants its AutoMod rules applied) on
first use per server, cached, and kept current by the AUTO_MODERATION_RULE_CREATE/UPDATE/DELETE
gateway events (the `auto_moderation_configuration` intent, not privileged). Without the
permission the server's rules are skipped silently (logged once per server) and asked again
after REFRESH_SECONDS, in case it was granted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

import discord

from game.content_rules import RuleSet, automod_rule_name

log = logging.getLogger(__name__)

REFRESH_SECONDS = 300.0  # a server's rules are read again this long after they were (events keep them current between)


@dataclass(frozen=True)
class _Rule:
    rules: RuleSet
    exempt_roles: frozenset[int]
    exempt_channels: frozenset[int]

    def applies(self, channel_id: int | None, role_ids: set[int]) -> bool:
        return channel_id not in self.exempt_channels and not (role_ids & self.exempt_roles)


def _as_rule(rule: discord.AutoModRule) -> _Rule | None:
    """An enabled keyword rule as a rule set; None for other rules (spam, mention, member profile...)."""
    trigger = rule.trigger
    if not rule.enabled or trigger.type is not discord.AutoModRuleTriggerType.keyword:
        return None
    rules = RuleSet.of(automod_rule_name(rule.name), trigger.keyword_filter, trigger.allow_list)
    if not rules.terms:
        return None  # a rule of regex patterns only
    return _Rule(rules, frozenset(rule.exempt_role_ids), frozenset(rule.exempt_channel_ids))


class Listeners(Protocol):
    """The discord client, as far as keeping the rules current reads it: it adds the listeners of
    the AutoMod rule events."""

    def add_listener(self, func: Callable[..., Coroutine[Any, Any, Any]], /, name: str = ...) -> None: ...


class AutoModRules:
    """Per server: its keyword rules by rule id, when they were read, and whether the bot may read them."""

    def __init__(self, client: Listeners) -> None:
        self._rules: dict[int, dict[int, _Rule]] = {}
        self._read_at: dict[int, float] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._told: set[int] = set()  # servers whose missing permission was logged
        client.add_listener(self._changed, "on_automod_rule_create")
        client.add_listener(self._changed, "on_automod_rule_update")
        client.add_listener(self._deleted, "on_automod_rule_delete")

    async def for_interaction(self, interaction: discord.Interaction) -> tuple[RuleSet, ...]:
        """The server's keyword rules that apply to this member in this channel."""
        guild = interaction.guild
        if guild is None:
            return ()
        user = interaction.user
        role_ids = {r.id for r in user.roles} if isinstance(user, discord.Member) else set()
        rules = await self._guild_rules(guild)
        return tuple(r.rules for r in rules.values() if r.applies(interaction.channel_id, role_ids))

    async def _guild_rules(self, guild: discord.Guild) -> dict[int, _Rule]:
        fresh = time.monotonic() - self._read_at.get(guild.id, -REFRESH_SECONDS) < REFRESH_SECONDS
        if fresh and guild.id in self._rules:
            return self._rules[guild.id]
        async with self._locks.setdefault(guild.id, asyncio.Lock()):
            if guild.id in self._rules and time.monotonic() - self._read_at[guild.id] < REFRESH_SECONDS:
                return self._rules[guild.id]
            self._rules[guild.id] = await self._read(guild)
            self._read_at[guild.id] = time.monotonic()
            return self._rules[guild.id]

    async def _read(self, guild: discord.Guild) -> dict[int, _Rule]:
        me = guild.me
        if me is not None and not me.guild_permissions.manage_guild:
            self._skip(guild, "the bot lacks Manage Server")
            return {}
        try:
            found = await guild.fetch_automod_rules()
        except discord.Forbidden:
            self._skip(guild, "Discord refused (Manage Server is needed)")
            return {}
        except discord.HTTPException as e:  # retried at the next use after REFRESH_SECONDS
            log.warning("server %s: could not read its AutoMod rules: %s", guild.id, e)
            return self._rules.get(guild.id, {})
        self._told.discard(guild.id)
        return {r.id: rule for r in found if (rule := _as_rule(r)) is not None}

    def _skip(self, guild: discord.Guild, why: str) -> None:
        if guild.id not in self._told:
            self._told.add(guild.id)
            log.info("server %s: its AutoMod keyword rules are not applied to game text (%s)", guild.id, why)

    async def _changed(self, rule: discord.AutoModRule) -> None:
        rules = self._rules.get(rule.guild.id)
        if rules is None:
            return  # not read yet: the first use reads them all
        converted = _as_rule(rule)
        if converted is None:
            rules.pop(rule.id, None)
        else:
            rules[rule.id] = converted

    async def _deleted(self, rule: discord.AutoModRule) -> None:
        self._rules.get(rule.guild.id, {}).pop(rule.id, None)
