"""Which language the bot speaks: the member's for what only they see, the server's for the rest.

- Ephemeral answers, buttons' answers, modals and autocomplete follow `interaction.locale` (the
  member's Discord client language). `adopt(interaction)` makes it current for the rest of the
  interaction's task; the command tree and every button (`LocalizedItem`: the bot's buttons are
  DynamicItems) call it from their interaction check, before any handler.
- Public messages (turn posts, status messages, vote rounds, notices, announcements) follow the
  server: the channel's `/admin language`, else the server's, else the guild's `preferred_locale`
  (Discord's "Server Primary Language" in Community servers), else English. Code that posts
  publicly renders inside `async with public(bot, guild_id, channel_id):`; while answering an
  interaction, `public_for(interaction)` is that language.

What answers an interaction gets the client as `interaction.client`; it is typed here by what is
read of it (`Speaker`), not imported, so that the client can import this module: no import circle.
The client's parts are given a `Languages` instead: the same reads, made of the settings, the
configuration cache and the guild look-up, not of the client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import discord

from bot.parts.config_cache import ConfigCache
from i18n import locales
from i18n.context import set_locale, use_locale
from settings import Settings


class Speaker(Protocol):
    """What choosing a server's language reads of the bot."""

    @property
    def settings(self) -> Settings: ...

    @property
    def config(self) -> ConfigCache: ...

    def get_guild(self, id: int, /) -> discord.Guild | None: ...


class GuildLookup(Protocol):
    """The discord client, as far as a server's language reads it."""

    def get_guild(self, id: int, /) -> discord.Guild | None: ...


class Languages:
    """A Speaker made of what it reads, for the client's parts."""

    def __init__(self, settings: Settings, config: ConfigCache, client: GuildLookup) -> None:
        self.settings, self.config, self._client = settings, config, client

    def get_guild(self, id: int, /) -> discord.Guild | None:
        return self._client.get_guild(id)


def adopt(interaction: discord.Interaction, *, pseudo: bool) -> str:
    """Make the member's language current for this interaction's task (the pseudo-locale when the
    bot's settings ask for it); returns the catalog."""
    return set_locale(locales.PSEUDO if pseudo else interaction.locale)


async def server_language(bot: Speaker, guild_id: int | None, channel_id: int | None = None,
                          *, guild_locale: object = None) -> str:
    """The catalog of a server's public posts (see the module docstring for the order)."""
    if guild_id is None:
        return locales.SOURCE
    if bot.settings.pseudo_locale:
        return locales.PSEUDO
    if channel_id is not None:
        chosen = (await bot.config.config(guild_id, channel_id)).language
        if chosen:
            return locales.resolve(chosen)
    if guild_locale is None:
        guild = bot.get_guild(guild_id)
        guild_locale = guild.preferred_locale if guild is not None else None
    return locales.resolve(guild_locale)


@asynccontextmanager
async def public(bot: Speaker, guild_id: int | None, channel_id: int | None = None,
                 *, guild_locale: object = None) -> AsyncIterator[str]:
    """Render a public message in the server's language: `async with public(bot, g, c): ...`."""
    with use_locale(await server_language(bot, guild_id, channel_id, guild_locale=guild_locale)) as loc:
        yield loc


async def public_for(interaction: discord.Interaction[Any]) -> str:
    """The server's language for a public message sent while answering an interaction."""
    bot: Speaker = interaction.client
    return await server_language(bot, interaction.guild_id, interaction.channel_id, guild_locale=interaction.guild_locale)


class LocalizedItem:
    """Mixin for buttons and DynamicItems: `class X(LocalizedItem, discord.ui.DynamicItem[...])`:
    the member's language is adopted before the callback."""

    async def interaction_check(self, interaction: discord.Interaction[Any]) -> bool:
        bot: Speaker = interaction.client
        adopt(interaction, pseudo=bot.settings.pseudo_locale)
        return True
