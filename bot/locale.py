"""Which language the bot speaks: the member's for what only they see, the server's for the rest.

- Ephemeral answers, buttons' answers, modals and autocomplete follow `interaction.locale` (the
  member's Discord client language). `adopt(interaction)` makes it current for the rest of the
  interaction's task; the command tree and every button (`LocalizedItem`: the bot's buttons are
  DynamicItems) call it from their interaction check, before any handler. A view or modal added
  later calls it from its own interaction_check.
- Public messages (turn posts, status messages, vote rounds, notices, announcements) follow the
  server: the channel's `/admin language`, else the server's, else the guild's `preferred_locale`
  (Discord's "Server Primary Language" in Community servers), else English. Code that posts
  publicly renders inside `async with public(bot, guild_id, channel_id):`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import discord

from i18n import locales
from i18n.context import set_locale, use_locale

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


def adopt(interaction: discord.Interaction) -> str:
    """Make the member's language current for this interaction's task; returns the catalog."""
    from bot.context import bot_of

    pseudo = getattr(getattr(bot_of(interaction), "settings", None), "pseudo_locale", False)
    return set_locale(locales.PSEUDO if pseudo else interaction.locale)


async def server_language(bot: AnimeGamerBot, guild_id: int | None, channel_id: int | None = None,
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
async def public(bot: AnimeGamerBot, guild_id: int | None, channel_id: int | None = None,
                 *, guild_locale: object = None) -> AsyncIterator[str]:
    """Render a public message in the server's language: `async with public(bot, g, c): ...`."""
    with use_locale(await server_language(bot, guild_id, channel_id, guild_locale=guild_locale)) as loc:
        yield loc


async def public_for(interaction: discord.Interaction) -> str:
    """The server's language for a public message sent while answering an interaction."""
    from bot.context import bot_of

    return await server_language(bot_of(interaction), interaction.guild_id, interaction.channel_id,
                                 guild_locale=interaction.guild_locale)


class LocalizedItem:
    """Mixin for buttons and DynamicItems: `class X(LocalizedItem, discord.ui.DynamicItem[...])`."""

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        adopt(interaction)
        return True
