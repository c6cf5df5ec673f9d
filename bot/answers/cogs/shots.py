"""The message commands on a turn's post ("Apps" on the message): "Remove shot" (a moderator, or
the turn's author: bot.parts.removal) and "Report shot" (any member: the shot goes to the moderation
log with a jump link, bot.answers.modlog). Answers are ephemeral.

The interaction carries the target message (data.resolved); its id is the turn's post (or status
message) recorded on the turn. A report is audited like every action, and the audit entry is what
reaches the log channel; each member may report once per `report_cooldown` seconds (one
delivered report starts it; a refused one costs nothing).
"""

from __future__ import annotations

import time

import discord
from discord import app_commands

from bot.answers import checks
from bot.answers.cogs.shared import GameCog, Interaction
from bot.client import AnimeGamerBot
from bot.parts import context, locale
from bot.parts import removal as shot_removal
from bot.parts.embeds import person
from bot.parts.service_args import member, place
from game.shot_errors import ReportCooldown
from i18n import L_, _, use_locale
from service import shots

REPORT_COOLDOWN = 60.0  # seconds between two reports of one member
# Stored on the turn and shown on its post (the server's language); "Remove shot" is the menu's name
MENU_REASON = L_("removed with the Remove shot menu")


class ReportLimiter:
    """One report per member per `cooldown` seconds (per server)."""

    def __init__(self, cooldown: float, clock=time.monotonic) -> None:
        self.cooldown = cooldown
        self.clock = clock
        self._last: dict[tuple[int, int], float] = {}

    def check(self, guild_id: int, user_id: int) -> None:
        left = self._last.get((guild_id, user_id), float("-inf")) + self.cooldown - self.clock()
        if left > 0:
            raise ReportCooldown(left)

    def sent(self, guild_id: int, user_id: int) -> None:
        now = self.clock()
        self._last = {k: t for k, t in self._last.items() if now - t < self.cooldown}
        self._last[(guild_id, user_id)] = now


class Shots(GameCog):
    def __init__(self, bot: AnimeGamerBot) -> None:
        super().__init__(bot)
        self.reports = ReportLimiter(REPORT_COOLDOWN)
        self.menus = (
            app_commands.ContextMenu(name="Remove shot", callback=self.remove_shot),
            app_commands.ContextMenu(name="Report shot", callback=self.report_shot),
        )
        for menu in self.menus:
            menu.guild_only = True

    async def cog_load(self) -> None:
        for menu in self.menus:
            self.bot.tree.add_command(menu)

    async def cog_unload(self) -> None:
        for menu in self.menus:
            self.bot.tree.remove_command(menu.name, type=menu.type)

    async def remove_shot(self, interaction: Interaction, message: discord.Message) -> None:
        turn = await shots.shot_by_message(self.service, context.guild_id(interaction), message.id)
        with use_locale(await locale.public_for(interaction)):
            reason = str(MENU_REASON)
        done = await shot_removal.remove(self.bot, self.service, interaction, turn.id, reason, via="Remove shot",
                                         moderator=await checks.is_moderator(interaction))
        await interaction.followup.send(shot_removal.answer(done), ephemeral=True)

    async def report_shot(self, interaction: Interaction, message: discord.Message) -> None:
        guild_id = context.guild_id(interaction)
        turn = await shots.reportable(self.service, guild_id, message.id)
        self.reports.check(guild_id, interaction.user.id)  # after what cannot be served: it says why first
        await shots.report(self.service, place(interaction), member(interaction), turn, message.id)
        self.reports.sent(guild_id, interaction.user.id)
        await interaction.followup.send(
            _("Thank you: turn #%(seq)s by %(author)s was sent to the moderators.", seq=turn.seq, author=person(turn.author_name)),
            ephemeral=True,
        )


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Shots(bot))
