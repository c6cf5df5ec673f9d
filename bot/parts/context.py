"""Where a command was used, typed: the server channel (the bot that handles it is
`interaction.client`, typed by `discord.Interaction[AnimeGamerBot]`).

discord.py types `guild_id`/`channel_id` as optional (an interaction can come from a DM or a user-installed context). This bot's commands run
in server channels only (`guild_only`), so a missing id is refused with GuildOnly, the same answer
the rights checks give, rather than reaching the database as NULL.
"""

from __future__ import annotations

import discord

from game.errors import GuildOnly


def guild_id(interaction: discord.Interaction) -> int:
    """The server the command was used in; GuildOnly outside a server."""
    if interaction.guild_id is None:
        raise GuildOnly()
    return interaction.guild_id


def channel_id(interaction: discord.Interaction) -> int:
    """The channel the command was used in; GuildOnly outside a server's channel."""
    if interaction.guild_id is None or interaction.channel_id is None:
        raise GuildOnly()
    return interaction.channel_id

