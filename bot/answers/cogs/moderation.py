"""/mod: pause, resume, reset, cancel a turn, kick a player. Manage Messages or a configured
moderator role (checked by the bot); every action is audited in its transaction and announced."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.answers import checks
from bot.answers.cogs.shared import GameCog, Interaction, announce, by
from bot.client import AnimeGamerBot
from bot.parts import locale
from bot.parts import removal as shot_removal
from bot.parts.embeds import FIELD_VALUE_MAX, esc, fit
from bot.parts.service_args import member, place
from game.catalogue import display_film
from game.stored_reasons import pause_reason
from i18n import _, ngettext, use_locale
from service import moderation
from service.deps import Member


class Moderation(GameCog):
    mod = app_commands.Group(
        name="mod",
        description="Moderate this channel's game",
        guild_only=True,
        default_permissions=discord.Permissions(manage_messages=True),
    )

    async def interaction_check(self, interaction: Interaction) -> bool:
        """Every /mod command: Manage Messages, a configured moderator role, or an admin."""
        return await checks.require(interaction, "moderator")

    @mod.command(name="pause", description="Pause the game: no new turns until it is resumed")
    @app_commands.describe(reason="Shown to the players")
    async def pause(self, interaction: Interaction, reason: app_commands.Range[str, 1, 200] | None = None) -> None:
        automod = await self.bot.automod.for_interaction(interaction) if reason else ()
        gs = await moderation.pause(self.service, place(interaction), member(interaction), reason, automod)
        name, reason_shown = by(interaction), pause_reason(gs.paused_reason, gs.paused_note)  # as stored (cleaned)
        await announce(
            interaction,
            lambda: _("%(name)s paused the game (%(reason)s).", name=name, reason=esc(str(reason_shown))) if reason_shown
            else _("%(name)s paused the game.", name=name),
            _("The game is paused."),
        )

    @mod.command(name="resume", description="Resume a paused game")
    async def resume(self, interaction: Interaction) -> None:
        await moderation.resume(self.service, place(interaction), member(interaction))
        name = by(interaction)
        await announce(interaction, lambda: _("%(name)s resumed the game. Play on with /act.", name=name), _("The game is resumed."))

    @mod.command(name="reset", description="Archive this game and start again: same players, states back to the start")
    async def reset(self, interaction: Interaction) -> None:
        done = await moderation.reset(self.service, place(interaction), member(interaction))
        with use_locale(await locale.public_for(interaction)):  # on the turns' public status messages
            note = _("The game was reset.")
        for t in done.cancelled:
            self.bot.board.spawn(self.bot.board.finish(t.id, "cancelled", note=note), f"close-turn-{t.id}")
        name = by(interaction)
        await announce(
            interaction,
            lambda: _("%(name)s reset the game: every character is back to the start, and the same players play on.", name=name),
            ngettext("The game is reset (%(n)s waiting turn cancelled).", "The game is reset (%(n)s waiting turns cancelled).",
                     len(done.cancelled)),
        )

    @mod.command(name="cancel", description="Cancel a queued turn")
    @app_commands.describe(turn="The turn's number (#)", reason="Shown to the players")
    async def cancel(
        self, interaction: Interaction, turn: app_commands.Range[int, 1], reason: app_commands.Range[str, 1, 200] | None = None
    ) -> None:
        automod = await self.bot.automod.for_interaction(interaction) if reason else ()
        mod = interaction.user.display_name
        with use_locale(await locale.public_for(interaction)):  # shown on the turn's status message
            note = _("Cancelled by %(name)s: %(reason)s.", name=esc(mod), reason=esc(reason)) if reason else \
                _("Cancelled by %(name)s.", name=esc(mod))
        # The turn keeps a code, the moderator's name and their words (rendered where shown).
        row = await moderation.cancel(self.service, place(interaction), member(interaction), seq=turn,
                                      reason=reason, extra_rules=automod)
        self.bot.board.spawn(self.bot.board.finish(row.id, "cancelled", note=fit(note, FIELD_VALUE_MAX)),
                             f"close-turn-{row.id}")
        name, seq = by(interaction), row.seq
        await announce(interaction, lambda: _("%(name)s cancelled turn #%(seq)s.", name=name, seq=seq),
                       _("Turn #%(seq)s is cancelled.", seq=seq))

    @mod.command(name="kick", description="Remove a player from the game (their character becomes free)")
    @app_commands.describe(player="The player")
    async def kick(self, interaction: Interaction, player: discord.User) -> None:
        gs, p = await moderation.kick(self.service, place(interaction), member(interaction), Member(player.id, player.display_name))
        film, character_id = display_film(gs.film_id), p.character_id
        name, kicked = by(interaction), esc(player.display_name)
        await announce(
            interaction,
            lambda: _("%(name)s removed %(player)s from the game; %(character)s is free to join.",
                      name=name, player=kicked, character=film.character_name_in(character_id)),
            _("%(player)s no longer plays %(character)s.", player=kicked, character=film.character_name_in(character_id)),
        )

    @mod.command(name="remove", description="Take a shot down: its clip and text go; the characters keep their states")
    @app_commands.describe(turn="The turn's number (#) in this channel's game", reason="Why (kept in the audit log and shown on the post)")
    async def remove(
        self, interaction: Interaction, turn: app_commands.Range[int, 1], reason: app_commands.Range[str, 1, 200]
    ) -> None:
        automod = await self.bot.automod.for_interaction(interaction)
        turn_id = await moderation.turn_id_of(self.service, place(interaction), turn, reason, automod)  # the reason is shown on the post
        done = await shot_removal.remove(self.bot, self.service, interaction, turn_id, reason, via="/mod remove",
                                         moderator=await checks.is_moderator(interaction))
        await interaction.followup.send(shot_removal.answer(done), ephemeral=True)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Moderation(bot))
