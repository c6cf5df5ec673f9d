"""Players' commands: /game start|join|leave, /act, /status, /history, /queue, /export
(/history and /export also reach a past game by its number; /games lists them).

Every command defers at once (ephemeral), so refusals and the database's answers can take longer
than Discord's 3 s; what the whole channel should see is sent to the channel."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import discord
from discord import app_commands

from bot.answers import checks
from bot.answers.choices import film_choices, join_choices
from bot.answers.cogs.shared import (
    Adverb,
    Background,
    GameCog,
    Interaction,
    Motion,
    Others,
    TimeOfDay,
    act_fields,
    announce,
    fields,
    lines_within,
    with_cleaning_notes,
    with_note,
)
from bot.answers.export import ExportLimiter, export_session
from bot.answers.notices import english_note
from bot.client import AnimeGamerBot
from bot.parts.embeds import history_embed, person, states_embed
from bot.parts.service_args import member, place
from bot.parts.status import position_text
from game.catalogue import display_film
from i18n import _, ngettext
from service import listings, players

log = logging.getLogger(__name__)

EXPORT_MAX = 100  # shots per /export (about 3.5 minutes of video; read one clip at a time)


class Play(GameCog):
    game = app_commands.Group(name="game", description="Start, join or leave this channel's game", guild_only=True)

    def __init__(self, bot: AnimeGamerBot) -> None:
        super().__init__(bot)
        self.exports = ExportLimiter(bot.settings.export_cooldown_seconds)

    # --- /game

    @game.command(name="start", description="Start a game in this channel")
    @app_commands.describe(film="The film to play (admins only; default: the film configured here)")
    @app_commands.autocomplete(film=film_choices)
    async def start(self, interaction: Interaction, film: str | None = None) -> None:
        automod = await self.bot.automod.for_interaction(interaction)
        admin = bool(film) and await checks.is_admin(interaction)
        done = await players.start(self.service, place(interaction), member(interaction), film, admin=admin, extra_rules=automod)
        await announce(interaction, lambda: _("%(name)s started a game of %(film)s. Pick a character with /game join.",
                                              name=person(done.name), film=done.film.title_in()),
                       _("The game of %(film)s has started.", film=done.film.title_in()))

    @game.command(name="join", description="Play a character in this channel's game")
    @app_commands.describe(character="A free character of this channel's cast")
    @app_commands.autocomplete(character=join_choices)
    async def join(self, interaction: Interaction, character: str) -> None:
        automod = await self.bot.automod.for_interaction(interaction)
        done = await players.join(self.service, place(interaction), member(interaction), character, automod)
        film, p = done.film, done.player  # the name as stored: /status and posts show it
        await announce(interaction, lambda: _("%(name)s plays %(character)s.", name=person(p.user_name),
                                              character=film.character_name_in(p.character_id)),
                       _("You play %(character)s. Make a move with /act.", character=film.character_name_in(p.character_id)))

    @game.command(name="leave", description="Stop playing your character")
    async def leave(self, interaction: Interaction) -> None:
        done = await players.leave(self.service, place(interaction), interaction.user.id)
        film, p = display_film(done.session.film_id), done.player
        await announce(interaction, lambda: _("%(name)s no longer plays %(character)s.", name=person(p.user_name),
                                              character=film.character_name_in(p.character_id)),
                       _("You left the game."))

    # --- /act

    @app_commands.command(name="act", description="Play a turn: your character (and others) in the next shot")
    @app_commands.guild_only()
    @act_fields(others="Other characters in the shot, separated by commas")
    async def act(
        self,
        interaction: Interaction,
        motion: Motion,
        background: Background,
        adverb: Adverb | None = None,
        time_of_day: TimeOfDay | None = None,
        others: Others | None = None,
    ) -> None:
        automod = await self.bot.automod.for_interaction(interaction)  # content rules: before the cooldown and the backlog
        done = await players.act(self.service, place(interaction), member(interaction),
                                 fields(motion, background, adverb, time_of_day, others), automod)
        await self.bot.board.announce_queued(done.turn.id, done.position)
        text = with_cleaning_notes(_("Turn #%(seq)s is queued (%(position)s).", seq=done.turn.seq,
                                     position=position_text(done.position)), done.instruction.notes)
        note = await english_note(self.bot, interaction, [motion, background, adverb, time_of_day], film=done.film)
        await interaction.followup.send(with_note(text, note), ephemeral=True)

    # --- information

    @app_commands.command(name="status", description="Every character's stamina, social and entertainment")
    @app_commands.guild_only()
    async def status(self, interaction: Interaction) -> None:
        live = await listings.standing(self.service, place(interaction))
        await interaction.followup.send(embed=states_embed(live, display_film(live.film_id), live.states, live.players),
                                        ephemeral=True)

    @app_commands.command(name="history", description="The latest turns of this channel's game, or of a past game")
    @app_commands.guild_only()
    @app_commands.describe(count="How many turns (default 10)", game="A game's number from /games (default: the current game)")
    async def history(
        self, interaction: Interaction, count: app_commands.Range[int, 1, 25] = 10, game: app_commands.Range[int, 1] | None = None
    ) -> None:
        shown = await listings.history(self.service, place(interaction), count, game)
        # TRANSLATORS: a past game in /history's title ("History · Kiki's Delivery Service · game 2")
        label = _("game %(number)s", number=game) if game is not None else None
        await interaction.followup.send(embed=history_embed(shown.turns, display_film(shown.film_id), label=label), ephemeral=True)

    @app_commands.command(name="queue", description="Where this channel's waiting turns stand in the film's queue")
    @app_commands.guild_only()
    async def queue(self, interaction: Interaction) -> None:
        # TRANSLATORS: a waiting turn in /queue: "#3 by alice: position 2 in the queue"
        lines = [_("#%(seq)s by %(author)s: %(position)s", seq=w.seq, author=person(w.author_name),
                   position=position_text(w.position))
                 for w in await listings.waiting(self.service, place(interaction))]
        await interaction.followup.send(lines_within(lines) or _("No turns are waiting in this channel."), ephemeral=True)

    @app_commands.command(name="export", description="This game's shots (or a past game's) stitched into one video")
    @app_commands.guild_only()
    @app_commands.describe(game="A game's number from /games (default: the current game)")
    async def export(self, interaction: Interaction, game: app_commands.Range[int, 1] | None = None) -> None:
        # What cannot be served says why before the rate limit applies: no game, no finished shot.
        gs = await listings.exportable(self.service, place(interaction), game)
        async with self.exports.hold(interaction.user.id):
            film = display_film(gs.film_id)
            with tempfile.TemporaryDirectory(prefix="animegamer-export-") as tmp:
                done = await export_session(self.service, gs.session_id, count=EXPORT_MAX,
                                            limit=interaction.filesize_limit, out_dir=Path(tmp))
                await interaction.followup.send(
                    ngettext("%(film)s: %(n)s shot, turns #%(first)s to #%(last)s.",
                             "%(film)s: %(n)s shots, turns #%(first)s to #%(last)s.", done.shots,
                             film=film.title_in(), first=done.first_seq, last=done.last_seq),
                    file=discord.File(done.path, filename=f"{film.id}-game-{gs.session_id}.mp4"),
                    ephemeral=True,
                )


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Play(bot))
