"""The game service (service/) as the bot runs it: on the bot's database and its turn queue, whose
failure to defer a job reads as "the queue is down" (bot.job_queue.JobQueue); and where and by whom
an interaction was used, as the service takes them."""

from __future__ import annotations

from typing import Protocol

import discord

from bot import context
from db.runtime import Database
from service.game import Game, Member, Place
from service.jobs import Jobs
from settings import Settings


class RunsGames(Protocol):
    """What the bot gives the service (a narrow view of AnimeGamerBot)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def db(self) -> Database: ...

    @property
    def queue(self) -> Jobs: ...


def game_of(bot: RunsGames) -> Game:
    return Game(bot.settings, bot.db.sessions, bot.queue)


def place(interaction: discord.Interaction) -> Place:
    """The server channel a command or button was used in (GuildOnly elsewhere)."""
    return Place(*context.place(interaction))


def member(interaction: discord.Interaction) -> Member:
    """Who used it, by their display name there."""
    return Member(interaction.user.id, interaction.user.display_name)
