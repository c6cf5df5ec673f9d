"""Players' commands: /game start|join|leave, /act, /status, /history, /queue, /export
(/history and /export also reach a past game by its number; /games lists them).

Every command defers at once (ephemeral), so refusals and the database's answers can take longer
than Discord's 3 s; what the whole channel should see is sent to the channel."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import checks, context, locale
from bot.choices import catalogue_choices, film_choices, join_choices, others_choices, split_names
from bot.embeds import CONTENT_MAX, fit, history_embed, person, states_embed
from bot.export import ExportLimiter, export_session
from bot.notices import english_note
from bot.status import position_text
from db import games as past_games
from db import guilds
from db import sessions as game_sessions
from db import turns as turn_service
from db.guilds import ChannelConfig
from game.catalogue import display_film, session_film
from game.errors import FilmFixed, NoFilm, NothingToExport, NotJoined, UnknownCharacter
from i18n import _, ngettext, use_locale

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

log = logging.getLogger(__name__)

EXPORT_MAX = 100  # shots per /export (about 3.5 minutes of video; read one clip at a time)


def with_cleaning_notes(text: str, ins) -> str:
    """An answer to /act or /vote propose, plus what sanitising changed in the player's text."""
    if not ins.notes:
        return text
    # TRANSLATORS: %(notes)s lists what was changed in a player's text, separated by semicolons
    return text + "\n" + _("Your text was cleaned: %(notes)s.", notes="; ".join(str(n) for n in ins.notes))


def with_note(text: str, note: str | None) -> str:
    """An answer with a one-time notice (bot.notices) after it, the notice kept whole when the
    answer must be cut to fit a message."""
    if not note:
        return fit(text, CONTENT_MAX)
    note = fit(note, CONTENT_MAX // 2)
    return fit(text, CONTENT_MAX - len(note) - 2) + "\n\n" + note


def lines_within(lines: list[str], limit: int = CONTENT_MAX) -> str:
    """Whole lines, as many as a message holds; the rest said as a count."""
    out: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        more = ngettext("… and %(n)s more", "… and %(n)s more", len(lines) - i)
        if size + len(line) + 1 + len(more) > limit:
            out.append(more)
            break
        out.append(line)
        size += len(line) + 1
    return fit("\n".join(out), limit)


def act_fields(others: str):
    """The /act fields as Discord shows them (names, help, autocomplete from the channel's film
    and cast), shared by /act and /vote propose; `others` is the help of the `with` field."""

    def apply(command):
        command = app_commands.describe(
            motion="What happens, e.g. fly on broomstick",
            background="Where, e.g. sky",
            adverb="How, e.g. quickly",
            time_of_day="When, e.g. night",
            others=others,
        )(command)
        command = app_commands.rename(time_of_day="time", others="with")(command)
        return app_commands.autocomplete(
            motion=catalogue_choices("motions"),
            background=catalogue_choices("backgrounds"),
            adverb=catalogue_choices("adverbs"),
            time_of_day=catalogue_choices("times"),
            others=others_choices,
        )(command)

    return apply


class Play(commands.Cog):
    game = app_commands.Group(name="game", description="Start, join or leave this channel's game", guild_only=True)

    def __init__(self, bot: AnimeGamerBot) -> None:
        self.bot = bot
        self.exports = ExportLimiter(bot.settings.export_cooldown_seconds)

    # --- shared look-ups

    async def _config(self, s, interaction: discord.Interaction) -> ChannelConfig:
        return await guilds.channel_config(s, self.bot.settings, context.guild_id(interaction), context.channel_id(interaction))


    async def _say(self, interaction: discord.Interaction, render: Callable[[], str]) -> None:
        """A line for the whole channel, rendered in the server's language (mentions are off
        client-wide)."""
        with use_locale(await locale.public_for(interaction)):
            text = fit(render(), CONTENT_MAX)
        await self.bot.board.channel(context.channel_id(interaction), context.guild_id(interaction)).send(text)

    # --- /game

    @game.command(name="start", description="Start a game in this channel")
    @app_commands.describe(film="The film to play (admins only; default: the film configured here)")
    @app_commands.autocomplete(film=film_choices)
    async def start(self, interaction: discord.Interaction, film: str | None = None) -> None:
        automod = await self.bot.automod.for_interaction(interaction)
        async with self.bot.db.sessions.begin() as s:
            cfg = await self._config(s, interaction)
            chosen = guilds.film_or_error(film) if film else cfg.film
            if chosen is None:
                raise NoFilm()
            if (cfg.film is None or chosen.id != cfg.film.id) and not await checks.is_admin(interaction):
                raise FilmFixed(cfg.film.title_in()) if cfg.film else NoFilm()
            await game_sessions.start_session(s, context.guild_id(interaction), context.channel_id(interaction), chosen, interaction.user.id)
        name, started = cfg.shown_name(interaction.user.display_name, automod), chosen
        await self._say(interaction, lambda: _("%(name)s started a game of %(film)s. Pick a character with /game join.",
                                               name=person(name), film=started.title_in()))
        await interaction.followup.send(_("The game of %(film)s has started.", film=started.title_in()), ephemeral=True)

    @game.command(name="join", description="Play a character in this channel's game")
    @app_commands.describe(character="A free character of this channel's cast")
    @app_commands.autocomplete(character=join_choices)
    async def join(self, interaction: discord.Interaction, character: str) -> None:
        automod = await self.bot.automod.for_interaction(interaction)
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction))
            film = session_film(gs.film_id)
            cfg = await self._config(s, interaction)
            cast = cfg.cast_for(film)
            ch = film.character(character)
            if ch is None or ch not in cast:
                raise UnknownCharacter(character, [film.character_name_in(c.id) for c in cast])
            name = cfg.shown_name(interaction.user.display_name, automod)  # stored: /status and posts show it
            await game_sessions.join(s, gs, film, interaction.user.id, name, ch.id)
        character_id = ch.id
        await self._say(interaction, lambda: _("%(name)s plays %(character)s.", name=person(name),
                                               character=film.character_name_in(character_id)))
        await interaction.followup.send(_("You play %(character)s. Make a move with /act.",
                                          character=film.character_name_in(character_id)), ephemeral=True)

    @game.command(name="leave", description="Stop playing your character")
    async def leave(self, interaction: discord.Interaction) -> None:
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction))
            p = await game_sessions.leave(s, gs, interaction.user.id)
        film, character_id = display_film(gs.film_id), p.character_id
        await self._say(interaction, lambda: _("%(name)s no longer plays %(character)s.", name=person(p.user_name),
                                               character=film.character_name_in(character_id)))
        await interaction.followup.send(_("You left the game."), ephemeral=True)

    # --- /act

    @app_commands.command(name="act", description="Play a turn: your character (and others) in the next shot")
    @app_commands.guild_only()
    @act_fields(others="Other characters in the shot, separated by commas")
    async def act(
        self,
        interaction: discord.Interaction,
        motion: app_commands.Range[str, 1, 100],
        background: app_commands.Range[str, 1, 100],
        adverb: app_commands.Range[str, 0, 100] | None = None,
        time_of_day: app_commands.Range[str, 0, 100] | None = None,
        others: app_commands.Range[str, 0, 200] | None = None,
    ) -> None:
        automod = await self.bot.automod.for_interaction(interaction)  # read before the transaction
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction), active=True)
            film = session_film(gs.film_id)
            cfg = await self._config(s, interaction)
            await turn_service.require_direct_play(s, context.channel_id(interaction))  # vote mode: /vote propose
            me = await game_sessions.player_of(s, gs.id, interaction.user.id)
            if me is None:
                raise NotJoined()
            ins = cfg.instruction(
                film,
                [me.character_id, *split_names(others)],
                motion,
                background,
                adverb or "",
                time_of_day or "",
                extra_rules=automod,  # content rules: checked before the cooldown and the backlog
            )
            turn = await turn_service.submit_turn(
                s,
                gs,
                author_id=interaction.user.id,
                author_name=cfg.shown_name(interaction.user.display_name, automod),
                instruction=ins,
                limits=cfg.limits,
                enqueue=self.bot.queue.enqueue,
            )
            position = await self.bot.queue.position(s, turn)
        await self.bot.board.announce_queued(turn, position, session=gs)
        text = with_cleaning_notes(_("Turn #%(seq)s is queued (%(position)s).", seq=turn.seq, position=position_text(position)), ins)
        note = await english_note(self.bot, interaction, [motion, background, adverb, time_of_day], film=film)
        await interaction.followup.send(with_note(text, note), ephemeral=True)

    # --- information

    @app_commands.command(name="status", description="Every character's stamina, social and entertainment")
    @app_commands.guild_only()
    async def status(self, interaction: discord.Interaction) -> None:
        async with self.bot.db.sessions() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction))
            states = await game_sessions.states(s, gs.id)
            players = await game_sessions.players(s, gs.id)
        await interaction.followup.send(embed=states_embed(gs, display_film(gs.film_id), states, players), ephemeral=True)

    async def _game(self, s, interaction: discord.Interaction, number: int | None):
        """The live game, or the channel's game `number` (past ones included: see /games)."""
        if number is None:
            return await game_sessions.require_session(s, context.channel_id(interaction))
        return await past_games.game_by_number(s, context.channel_id(interaction), number)

    @app_commands.command(name="history", description="The latest turns of this channel's game, or of a past game")
    @app_commands.guild_only()
    @app_commands.describe(count="How many turns (default 10)", game="A game's number from /games (default: the current game)")
    async def history(
        self, interaction: discord.Interaction, count: app_commands.Range[int, 1, 25] = 10, game: app_commands.Range[int, 1] | None = None
    ) -> None:
        async with self.bot.db.sessions() as s:
            gs = await self._game(s, interaction, game)
            turns = await turn_service.history(s, gs.id, count)
            # TRANSLATORS: a past game in /history's title ("History · Kiki's Delivery Service · game 2")
            label = _("game %(number)s", number=game) if game is not None else None
        await interaction.followup.send(embed=history_embed(turns, display_film(gs.film_id), label=label), ephemeral=True)

    @app_commands.command(name="queue", description="Where this channel's waiting turns stand in the film's queue")
    @app_commands.guild_only()
    async def queue(self, interaction: discord.Interaction) -> None:
        async with self.bot.db.sessions() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction))
            pending = await turn_service.pending_turns(s, gs.id)
            # TRANSLATORS: a waiting turn in /queue: "#3 by alice: position 2 in the queue"
            lines = [
                _("#%(seq)s by %(author)s: %(position)s", seq=t.seq, author=person(t.author_name),
                  position=position_text(await self.bot.queue.position(s, t)))
                for t in pending
            ]
        await interaction.followup.send(lines_within(lines) or _("No turns are waiting in this channel."), ephemeral=True)

    @app_commands.command(name="export", description="This game's shots (or a past game's) stitched into one video")
    @app_commands.guild_only()
    @app_commands.describe(game="A game's number from /games (default: the current game)")
    async def export(self, interaction: discord.Interaction, game: app_commands.Range[int, 1] | None = None) -> None:
        # What cannot be served says why before the rate limit applies: no game, no finished shot.
        async with self.bot.db.sessions() as s:
            gs = await self._game(s, interaction, game)
            if not await turn_service.exportable_shots(s, gs.id, 1):
                raise NothingToExport()
        async with self.exports.hold(interaction.user.id):
            film = display_film(gs.film_id)
            with tempfile.TemporaryDirectory(prefix="animegamer-export-") as tmp:
                done = await export_session(self.bot.db.sessions, gs.id, count=EXPORT_MAX,
                                            limit=interaction.filesize_limit, out_dir=Path(tmp))
                await interaction.followup.send(
                    ngettext("%(film)s: %(n)s shot, turns #%(first)s to #%(last)s.",
                             "%(film)s: %(n)s shots, turns #%(first)s to #%(last)s.", done.shots,
                             film=film.title_in(), first=done.first_seq, last=done.last_seq),
                    file=discord.File(done.path, filename=f"{film.id}-game-{gs.id}.mp4"),
                    ephemeral=True,
                )


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Play(bot))
