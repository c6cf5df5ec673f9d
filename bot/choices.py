"""Autocomplete answers shared by several cogs."""

from __future__ import annotations

import discord
from discord import app_commands

from game.catalogue import FILMS, suggest


async def film_choices(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
    """Films by title (/game start, /admin film)."""
    titles = {f.title: f.id for f in FILMS.values()}
    return [app_commands.Choice(name=t[:100], value=titles[t]) for t in suggest(tuple(titles), current)]
