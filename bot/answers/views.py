"""The clicks on the buttons that keep working after a restart: DynamicItems whose custom_id
carries the turn id (bot.parts.buttons: `ag:cancel:<turn>`, `ag:regen:<turn>`), registered once in
setup_hook. A click answers in the clicker's language (LocalizedItem adopts it before the
callback)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import discord

from bot.answers import checks, replies
from bot.parts import buttons
from bot.parts.acks import think
from bot.parts.embeds import esc
from bot.parts.locale import LocalizedItem
from bot.parts.service_args import deps_of, member, place
from i18n import L_, _
from service import moderation

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

log = logging.getLogger(__name__)


class _TurnButton(LocalizedItem, discord.ui.DynamicItem[discord.ui.Button], template=r"ag:(?:cancel|regen):(?P<turn>\d+)"):
    """What both buttons share: the turn id in the custom_id, rebuilt from it after a restart, and
    a callback that defers, acts on the turn (subclasses' `act`) and reports any refusal. Only the
    subclasses, each with its own template, are registered."""

    look: buttons.TurnButton  # its label, style and custom_id (bot.parts.buttons)

    def __init__(self, turn_id: int) -> None:
        super().__init__(self.look.button(turn_id))
        self.turn_id = turn_id

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction[AnimeGamerBot], item: discord.ui.Button, match: re.Match[str]):
        return cls(int(match["turn"]))

    async def callback(self, interaction: discord.Interaction[AnimeGamerBot]) -> None:
        try:
            await think(interaction)
            await interaction.followup.send(await self.act(interaction, interaction.client), ephemeral=True)
        except Exception as e:
            await replies.report(interaction, e)

    async def act(self, interaction: discord.Interaction[AnimeGamerBot], bot: AnimeGamerBot) -> str:
        """Do it; returns what the clicker is told."""
        raise NotImplementedError


class CancelButton(_TurnButton, template=buttons.CANCEL.template):
    """On a turn's status message while it is queued: its author or a moderator cancels it."""

    look = buttons.CANCEL

    async def act(self, interaction: discord.Interaction[AnimeGamerBot], bot: AnimeGamerBot) -> str:
        # The turn keeps a code and the clicker's name (rendered where shown).
        turn = await moderation.cancel_own(deps_of(bot), place(interaction), member(interaction), self.turn_id,
                                           moderator=await checks.is_moderator(interaction))
        # Shown on the public status message: rendered there, in the server's language.
        note = L_("Cancelled by %(name)s.", name=esc(interaction.user.display_name))
        bot.board.spawn(bot.board.finish(turn.id, "cancelled", note=note), f"close-turn-{turn.id}")
        return _("Turn #%(seq)s is cancelled.", seq=turn.seq)


class RegenerateButton(_TurnButton, template=buttons.REGENERATE.template):
    """On a posted turn: its author or a moderator generates the session's latest turn (cancelled
    ones do not count) again with a new seed (its effect on the characters is undone first)."""

    look = buttons.REGENERATE

    async def act(self, interaction: discord.Interaction[AnimeGamerBot], bot: AnimeGamerBot) -> str:
        done = await moderation.regenerate(deps_of(bot), place(interaction), member(interaction), self.turn_id,
                                           moderator=await checks.is_moderator(interaction))
        turn, gs, old_message = done.turn, done.session, done.old_message
        # The new take's status message first (the notifier waits for it rather than send a
        # message of its own); the old take stays in the channel, without its button.
        await bot.board.announce_queued(turn.id, done.position, regenerated=True)
        if old_message:
            bot.board.spawn(bot.board.strip_buttons(gs.channel_id, old_message), f"strip-{old_message}")
        return _("Turn #%(seq)s is being generated again with a new seed.", seq=turn.seq)
