"""/privacy show and /privacy delete: what the bot stores about a member, and deleting it.

The delete command only records a request (db.privacy.request_deletion) once the member confirms
with the button; the scheduled job (bot/parts/privacy.py, on the maintenance scheduler) carries it out,
step by step, so a restart halfway finishes it. The bot's arrivals and departures are listened to
here too: a server that removes the bot has its data deleted after ANIMEGAMER_GUILD_DATA_DAYS
unless the bot is added back (service.maintenance)."""

from __future__ import annotations

import logging
import re

import discord
from discord import app_commands
from discord.ext import commands

from bot.answers import replies
from bot.answers.cogs.shared import GameCog, Interaction
from bot.client import AnimeGamerBot
from bot.parts import context
from bot.parts.acks import answers_itself
from bot.parts.embeds import FAILED, FIELD_VALUE_MAX, INFO, fit, fit_label
from bot.parts.locale import LocalizedItem
from bot.parts.service_args import deps_of
from game.member_data import Counts, Stored
from i18n import L_, _, ngettext, pgettext
from service import maintenance, privacy

log = logging.getLogger(__name__)

POLICY_NOTE = L_("Details: the operator's privacy policy (docs/privacy.md).")


def _counts_line(c: Counts) -> str:
    if c.empty:
        return _("nothing")
    # TRANSLATORS: what the bot stores about a member, e.g. "2 games joined, 5 turns (3 clips still
    # stored), 1 vote and proposal, 0 audit entries"; each placeholder is one of the counts below
    return _("%(games)s, %(turns)s (%(clips)s), %(votes)s, %(audit)s",
             games=ngettext("%(n)s game joined", "%(n)s games joined", c.games),
             turns=ngettext("%(n)s turn", "%(n)s turns", c.turns),
             clips=ngettext("%(n)s clip still stored", "%(n)s clips still stored", c.clips),
             votes=ngettext("%(n)s vote and proposal", "%(n)s votes and proposals", c.votes),
             audit=ngettext("%(n)s audit entry", "%(n)s audit entries", c.audit))


def stored_embed(found: Stored) -> discord.Embed:
    e = discord.Embed(title=_("What this bot stores about you"), colour=INFO)
    e.add_field(name=_("In this server"), value=fit(_counts_line(found.here), FIELD_VALUE_MAX), inline=False)
    e.add_field(name=_("In all servers (%(servers)s)", servers=found.servers),
                value=fit(_counts_line(found.everywhere), FIELD_VALUE_MAX), inline=False)
    e.add_field(
        name=_("What that is"),
        value=fit(_(
            "With each of these: your user id and the display name you had. Your turns keep their "
            "instruction text and, until they are pruned, their clip. Audit entries record admin and "
            "moderator actions you took or that were taken on you."
        ), FIELD_VALUE_MAX),
        inline=False,
    )
    footer = _("A deletion you asked for is under way.") if found.pending else _("Delete it everywhere with /privacy delete.")
    e.set_footer(text=f"{footer} {POLICY_NOTE}")
    return e


CONFIRM_TEXT = L_(
    "This deletes what the bot stores about you **in every server**: you leave every game you play, "
    "your turns lose their clips and instruction texts, your votes and proposals and the audit log "
    "keep no id or name of yours (each server sees a \"deleted member\" instead). The turns' rows "
    "stay without any of your data, so the other players' games keep their turn numbers and "
    "character states. It cannot be undone."
)


class ConfirmDelete(LocalizedItem, discord.ui.DynamicItem[discord.ui.Button], template=r"ag:privacy:delete:(?P<user>\d+)"):
    """The confirm button of /privacy delete. Its custom_id carries the member it was shown to, so
    it keeps working after a restart and nobody else can press it for them. It answers in the
    language of the member who presses it."""

    def __init__(self, user_id: int) -> None:
        super().__init__(
            discord.ui.Button(label=fit_label(pgettext("button", "Delete my data")), style=discord.ButtonStyle.danger,
                              custom_id=f"ag:privacy:delete:{user_id}")
        )
        self.user_id = user_id

    @classmethod
    async def from_custom_id(cls, interaction: Interaction, item: discord.ui.Button, match: re.Match[str]):
        return cls(int(match["user"]))

    async def callback(self, interaction: Interaction) -> None:
        try:
            if interaction.user.id != self.user_id:
                await interaction.response.send_message(_("This button is for the member who asked."), ephemeral=True)
                return
            bot = interaction.client
            new = await privacy.request_deletion(deps_of(bot), self.user_id)
            bot.maintenance.wake_privacy()
            text = _("Your data is being deleted. `/privacy show` tells you when nothing is left.") if new else _(
                "Your deletion is already under way. `/privacy show` tells you when nothing is left."
            )
            await interaction.response.edit_message(content=text, embed=None, view=None)
        except Exception as e:
            await replies.report(interaction, e)


class Privacy(GameCog):
    privacy = app_commands.Group(name="privacy", description="What this bot stores about you, and deleting it", guild_only=True)

    @privacy.command(name="show", description="What this bot stores about you, here and in all servers")
    async def show(self, interaction: Interaction) -> None:
        found = await privacy.stored(self.service, interaction.user.id, context.guild_id(interaction))
        await interaction.followup.send(embed=stored_embed(found), ephemeral=True)

    @privacy.command(name="delete", description="Delete what this bot stores about you, in every server")
    @answers_itself  # the confirmation, with its button, is the first answer
    async def delete(self, interaction: Interaction) -> None:
        context.guild_id(interaction)
        e = discord.Embed(title=_("Delete your data?"), colour=FAILED, description=str(CONFIRM_TEXT))
        e.set_footer(text=str(POLICY_NOTE))
        view = discord.ui.View(timeout=None)
        view.add_item(ConfirmDelete(interaction.user.id))
        await interaction.response.send_message(embed=e, view=view, ephemeral=True)

    @commands.Cog.listener()
    async def on_guild_remove(self, guild: discord.Guild) -> None:
        """Removed from a server (kicked or the server deleted; an outage is on_guild_unavailable)."""
        try:
            gone = await maintenance.left_server(self.service, guild.id)
            log.info("removed from server %s: its data is deleted after %s unless the bot is added back", guild.id, gone.delete_after)
        except Exception as e:  # the database is down: the maintenance job cannot know; say so
            log.error("recording the departure from server %s failed: %s", guild.id, e)

    @commands.Cog.listener()
    async def on_guild_join(self, guild: discord.Guild) -> None:
        try:
            if await maintenance.back_in_server(self.service, guild.id):
                log.info("added back to server %s: its data stays", guild.id)
        except Exception as e:  # the next maintenance run cancels it (it checks the bot's servers)
            log.warning("cancelling the deletion of server %s's data failed for now: %s", guild.id, e)


async def setup(bot: AnimeGamerBot) -> None:
    bot.add_dynamic_items(ConfirmDelete)
    await bot.add_cog(Privacy(bot))
