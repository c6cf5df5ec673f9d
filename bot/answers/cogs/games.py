"""/games: the channel's games, past and present, with their turn counts. A reset archives a game
and starts the next; /history and /export take a game's number from this list."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.answers.cogs.shared import GameCog, Interaction
from bot.client import AnimeGamerBot
from bot.parts.embeds import DESCRIPTION_MAX, INFO, fit
from bot.parts.service_args import place
from game.catalogue import FILMS
from i18n import _, ngettext
from service import listings
from service.listings import Listed

SHOWN = 20  # the latest games listed (fewer when their lines overflow the embed's description)


def _line(g: Listed) -> str:
    film = FILMS.get(g.film_id)
    title = film.title_in() if film else g.film_id
    state = {"active": _("current"), "paused": _("current, paused")}.get(g.status) or _("archived")
    # TRANSLATORS: one line of /games. %(turns)s and %(shots)s are "2 turns", "1 shot";
    # %(when)s is a date Discord shows in the reader's language; %(state)s: current / archived.
    return _("**Game %(number)s** · %(title)s · %(turns)s, %(shots)s · started %(when)s · %(state)s",
             number=g.number, title=title,
             turns=ngettext("%(n)s turn", "%(n)s turns", g.turns),
             shots=ngettext("%(n)s shot", "%(n)s shots", g.done),
             when=f"<t:{int(g.created_at.timestamp())}:d>", state=state)


def _description(found: list[Listed]) -> str:
    """The latest games, newest last, as many of the latest SHOWN as the description holds."""
    lines: list[str] = []
    size = 0
    budget = DESCRIPTION_MAX - 100  # room for the "older games" line
    for g in reversed(found[-SHOWN:]):
        line = fit(_line(g), 1000)
        if lines and size + len(line) + 1 > budget:
            break
        lines.insert(0, line)
        size += len(line) + 1
    if len(found) > len(lines):
        lines.insert(0, ngettext("… %(n)s older game not shown", "… %(n)s older games not shown", len(found) - len(lines)))
    return fit("\n".join(lines), DESCRIPTION_MAX)


class Games(GameCog):
    @app_commands.command(name="games", description="This channel's games, past and present, with their turn counts")
    @app_commands.guild_only()
    async def games(self, interaction: Interaction) -> None:
        found = await listings.channel_games(self.service, place(interaction))
        e = discord.Embed(title=_("Games in this channel"), colour=INFO)
        if not found:
            e.description = _("No game has been played here yet. Start one with /game start.")
        else:
            e.description = _description(found)
            e.set_footer(text=_("See a past game with /history game:N, or stitch its shots with /export game:N."))
        await interaction.followup.send(embed=e, ephemeral=True)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Games(bot))
