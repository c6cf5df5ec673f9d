"""/games: the channel's games, past and present, with their turn counts. A reset archives a game
and starts the next; /history and /export take a game's number from this list."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import context
from bot.embeds import INFO
from db import games as past_games
from game.catalogue import FILMS

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

SHOWN = 20  # the latest games listed (an embed's description holds 4096 characters)


def _line(g: past_games.GameSummary) -> str:
    gs = g.session
    film = FILMS.get(gs.film_id)
    title = film.title if film else gs.film_id
    state = {"active": "current", "paused": "current, paused"}.get(gs.status, "archived")
    when = f"<t:{int(gs.created_at.timestamp())}:d>"
    return f"**Game {g.number}** · {title} · {g.turns} turn(s), {g.done} shot(s) · started {when} · {state}"


class Games(commands.Cog):
    def __init__(self, bot: AnimeGamerBot) -> None:
        self.bot = bot

    @app_commands.command(name="games", description="This channel's games, past and present, with their turn counts")
    @app_commands.guild_only()
    async def games(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self.bot.db.sessions() as s:
            found = await past_games.channel_games(s, context.channel_id(interaction))
        e = discord.Embed(title="Games in this channel", colour=INFO)
        if not found:
            e.description = "No game has been played here yet. Start one with /game start."
        else:
            lines = [_line(g) for g in found[-SHOWN:]]
            if len(found) > SHOWN:
                lines.insert(0, f"… {len(found) - SHOWN} older game(s) not shown")
            e.description = "\n".join(lines)
            e.set_footer(text="See a past game with /history game:N, or stitch its shots with /export game:N.")
        await interaction.followup.send(embed=e, ephemeral=True)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Games(bot))
