"""/mod: pause, resume, reset, cancel a turn, kick a player. Manage Messages or a configured
moderator role (checked by the bot); every action is audited in its transaction and announced."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import audit as bot_audit
from bot import checks, context, locale
from bot import removal as shot_removal
from bot.embeds import CONTENT_MAX, FIELD_VALUE_MAX, esc, fit
from db import guilds
from db import sessions as game_sessions
from db import turns as turn_service
from game.catalogue import display_film
from game.errors import PlayerNotInGame
from i18n import _, ngettext, use_locale

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


class Moderation(commands.Cog):
    mod = app_commands.Group(
        name="mod",
        description="Moderate this channel's game",
        guild_only=True,
        default_permissions=discord.Permissions(manage_messages=True),
    )

    def __init__(self, bot: AnimeGamerBot) -> None:
        self.bot = bot

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        """Every /mod command: Manage Messages, a configured moderator role, or an admin."""
        return await checks.require(interaction, "moderator")

    async def _announce(self, interaction: discord.Interaction, public: Callable[[], str], private: str) -> None:
        """`public()` to the channel, rendered in the server's language; `private` to the moderator."""
        with use_locale(await locale.public_for(interaction)):
            text = fit(public(), CONTENT_MAX)
        await self.bot.board.channel(context.channel_id(interaction), context.guild_id(interaction)).send(text)
        await interaction.followup.send(fit(private, CONTENT_MAX), ephemeral=True)

    def _by(self, interaction: discord.Interaction) -> str:
        return esc(interaction.user.display_name)

    async def _reason_allowed(self, interaction: discord.Interaction, reason: str | None) -> None:
        """A reason shown to the players goes through the content rules (ContentRefused names the rule set)."""
        if not reason:
            return
        automod = await self.bot.automod.for_interaction(interaction)
        async with self.bot.db.sessions() as s:
            cfg = await guilds.channel_config(s, self.bot.settings, context.guild_id(interaction), context.channel_id(interaction))
        cfg.require_allowed("reason", (reason,), automod)

    @mod.command(name="pause", description="Pause the game: no new turns until it is resumed")
    @app_commands.describe(reason="Shown to the players")
    async def pause(self, interaction: discord.Interaction, reason: app_commands.Range[str, 1, 200] | None = None) -> None:
        await self._reason_allowed(interaction, reason)
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction), lock=True)
            await game_sessions.set_paused(s, gs, True, reason)
            await bot_audit.record(s, interaction, "pause", f"session {gs.id}", reason=reason)
        by, reason_shown = self._by(interaction), esc(gs.paused_reason)  # the reason as stored (cleaned)
        await self._announce(
            interaction,
            lambda: _("%(name)s paused the game (%(reason)s).", name=by, reason=reason_shown) if reason_shown
            else _("%(name)s paused the game.", name=by),
            _("The game is paused."),
        )

    @mod.command(name="resume", description="Resume a paused game")
    async def resume(self, interaction: discord.Interaction) -> None:
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction), lock=True)
            await game_sessions.set_paused(s, gs, False)
            await bot_audit.record(s, interaction, "resume", f"session {gs.id}")
        by = self._by(interaction)
        await self._announce(interaction, lambda: _("%(name)s resumed the game. Play on with /act.", name=by), _("The game is resumed."))

    @mod.command(name="reset", description="Archive this game and start again: same players, states back to the start")
    async def reset(self, interaction: discord.Interaction) -> None:
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction), lock=True)
            waiting = [t for t in await turn_service.pending_turns(s, gs.id) if t.status == "queued"]
            fresh = await game_sessions.reset(s, gs, interaction.user.id)
            await self.bot.queue.cancel_stale_jobs(s, gs.id)
            await bot_audit.record(s, interaction, "reset", f"session {gs.id}", new_session=fresh.id, cancelled=len(waiting))
        with use_locale(await locale.public_for(interaction)):  # on the turns' public status messages
            note = _("The game was reset.")
        for t in waiting:
            self.bot.board.spawn(self.bot.board.finish(t, "cancelled", note=note, channel_id=gs.channel_id),
                                 f"close-turn-{t.id}")
        by = self._by(interaction)
        await self._announce(
            interaction,
            lambda: _("%(name)s reset the game: every character is back to the start, and the same players play on.", name=by),
            ngettext("The game is reset (%(n)s waiting turn cancelled).", "The game is reset (%(n)s waiting turns cancelled).",
                     len(waiting)),
        )

    @mod.command(name="cancel", description="Cancel a queued turn")
    @app_commands.describe(turn="The turn's number (#)", reason="Shown to the players")
    async def cancel(
        self, interaction: discord.Interaction, turn: app_commands.Range[int, 1], reason: app_commands.Range[str, 1, 200] | None = None
    ) -> None:
        await self._reason_allowed(interaction, reason)
        by = interaction.user.display_name
        with use_locale(await locale.public_for(interaction)):  # stored on the turn and shown on its status message
            # TRANSLATORS: why a turn was cancelled, stored on it; %(name)s is a moderator's name
            stored = _("cancelled by %(name)s: %(reason)s", name=by, reason=reason) if reason else _("cancelled by %(name)s", name=by)
            note = _("Cancelled by %(name)s: %(reason)s.", name=esc(by), reason=esc(reason)) if reason else \
                _("Cancelled by %(name)s.", name=esc(by))
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction))
            row = await turn_service.turn_by_seq(s, gs.id, turn)
            await self.bot.queue.cancel_queued_turn(s, row, stored)
            await bot_audit.record(s, interaction, "cancel_turn", str(row.seq), turn_id=row.id, reason=reason)
        self.bot.board.spawn(self.bot.board.finish(row, "cancelled", note=fit(note, FIELD_VALUE_MAX), channel_id=gs.channel_id),
                             f"close-turn-{row.id}")
        by_shown, seq = self._by(interaction), row.seq
        await self._announce(interaction, lambda: _("%(name)s cancelled turn #%(seq)s.", name=by_shown, seq=seq),
                             _("Turn #%(seq)s is cancelled.", seq=seq))

    @mod.command(name="kick", description="Remove a player from the game (their character becomes free)")
    @app_commands.describe(player="The player")
    async def kick(self, interaction: discord.Interaction, player: discord.User) -> None:
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction))
            if await game_sessions.player_of(s, gs.id, player.id) is None:
                raise PlayerNotInGame(esc(player.display_name))
            p = await game_sessions.leave(s, gs, player.id)
            await bot_audit.record(s, interaction, "kick", str(player.id), player=player.display_name, character=p.character_id)
        film, character_id = display_film(gs.film_id), p.character_id
        by, kicked = self._by(interaction), esc(player.display_name)
        await self._announce(
            interaction,
            lambda: _("%(name)s removed %(player)s from the game; %(character)s is free to join.",
                      name=by, player=kicked, character=film.character_name_in(character_id)),
            _("%(player)s no longer plays %(character)s.", player=kicked, character=film.character_name_in(character_id)),
        )

    @mod.command(name="remove", description="Take a shot down: its clip and text go; the characters keep their states")
    @app_commands.describe(turn="The turn's number (#) in this channel's game", reason="Why (kept in the audit log and shown on the post)")
    async def remove(
        self, interaction: discord.Interaction, turn: app_commands.Range[int, 1], reason: app_commands.Range[str, 1, 200]
    ) -> None:
        await self._reason_allowed(interaction, reason)  # shown on the post
        async with self.bot.db.sessions() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction))
            row = await turn_service.turn_by_seq(s, gs.id, turn)
        done = await shot_removal.remove(self.bot, interaction, row.id, reason, via="/mod remove")
        await interaction.followup.send(shot_removal.answer(done), ephemeral=True)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Moderation(bot))
