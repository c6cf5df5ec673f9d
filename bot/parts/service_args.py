"""The game service (service/) as the bot runs it: on the bot's database and its turn queue, whose
failure to defer a job reads as "the queue is down" (service.jobs.QueueDown); and where and by whom
an interaction was used, as the service takes them."""

from __future__ import annotations

import discord

from bot.parts import context
from bot.parts.hosting import Stored
from service.deps import Deps, Member, Place


def deps_of(bot: Stored) -> Deps:
    return Deps(bot.settings, bot.db.sessions, bot.queue)


def place(interaction: discord.Interaction) -> Place:
    """The server channel a command or button was used in; GuildOnly elsewhere (bot.parts.context)."""
    return Place(context.guild_id(interaction), context.channel_id(interaction))


def member(interaction: discord.Interaction) -> Member:
    """Who used it, by their display name there."""
    return Member(interaction.user.id, interaction.user.display_name)
