"""The languages of an interaction, for the commands and buttons that answer it (bot.locale says
which language is whose): the member's, adopted before a button's or a view's callback
(`LocalizedItem`), and the server's, for a public message sent while answering (`public_for`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord

from bot import locale

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


async def public_for(interaction: discord.Interaction[AnimeGamerBot]) -> str:
    """The server's language for a public message sent while answering an interaction."""
    return await locale.server_language(interaction.client, interaction.guild_id, interaction.channel_id,
                                        guild_locale=interaction.guild_locale)


class LocalizedItem:
    """Mixin for buttons and DynamicItems: `class X(LocalizedItem, discord.ui.DynamicItem[...])`."""

    async def interaction_check(self, interaction: discord.Interaction[AnimeGamerBot]) -> bool:
        locale.adopt(interaction, pseudo=interaction.client.settings.pseudo_locale)
        return True
