"""The game service (service/) as the bot runs it: on the bot's database and its turn queue, whose
failure to defer a job reads as "the queue is down" (service.jobs.QueueDown); and where and by whom
an interaction was used, as the service takes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import discord

from bot.parts import context
from service.deps import Deps, Member, Place
from service.jobs import Jobs
from service.runtime import Store
from settings import Settings

# The game service as a part makes it at each use (the client's parts are given this, not the
# client): made late, because a client may be made before its database is open (i18n extract).
Service = Callable[[], Deps]


class Stored(Protocol):
    """What the game service runs on in the client, as what answers interactions reads it there
    (deps_of(interaction.client)): its settings, its database and its turn queue."""

    @property
    def settings(self) -> Settings: ...

    @property
    def db(self) -> Store: ...

    @property
    def queue(self) -> Jobs: ...


def deps_of(bot: Stored) -> Deps:
    return Deps(bot.settings, bot.db.sessions, bot.queue)


def service_on(settings: Settings, db: Store, queue: Jobs) -> Service:
    """The game service on this database and turn queue, for the parts."""
    return lambda: Deps(settings, db.sessions, queue)


def place(interaction: discord.Interaction) -> Place:
    """The server channel a command or button was used in; GuildOnly elsewhere (bot.parts.context)."""
    return Place(context.guild_id(interaction), context.channel_id(interaction))


def member(interaction: discord.Interaction) -> Member:
    """Who used it, by their display name there."""
    return Member(interaction.user.id, interaction.user.display_name)
