"""The clicks on the buttons that keep working after a restart: DynamicItems whose custom_id
carries the turn id (bot.buttons: `ag:cancel:<turn>`, `ag:regen:<turn>`), registered once in
setup_hook. A click answers in the clicker's language (LocalizedItem adopts it before the
callback)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import discord

from bot import audit as bot_audit
from bot import buttons, checks, interaction_locale, replies
from bot.ack_gate import think
from bot.embeds import esc
from bot.interaction_locale import LocalizedItem
from db import sessions as game_sessions
from db import turn_reads
from db import turns as turn_service
from game.errors import GameEnded, NotLatestTurn, NotTurnAuthor, NoTurnToRegenerate, TurnNotFound
from i18n import L_, _, use_locale

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

log = logging.getLogger(__name__)


async def _turn_to_act_on(s, interaction: discord.Interaction[AnimeGamerBot], turn_id: int, verb: str):
    """The button's turn, if the clicker is its author or a moderator."""
    turn = await turn_reads.get_turn(s, turn_id)
    if turn is None:
        raise TurnNotFound(turn_id)
    if not (interaction.user.id == turn.author_id or await checks.is_moderator(interaction)):
        raise NotTurnAuthor(turn.author_name, verb)
    return turn


async def _audit_if_moderator(s, interaction: discord.Interaction[AnimeGamerBot], turn, action: str) -> None:
    """A moderator acting on someone else's turn is a moderation action: audit it."""
    if interaction.user.id != turn.author_id:
        await bot_audit.record(s, interaction, action, str(turn.seq), turn_id=turn.id, via="button")


class _TurnButton(LocalizedItem, discord.ui.DynamicItem[discord.ui.Button], template=r"ag:(?:cancel|regen):(?P<turn>\d+)"):
    """What both buttons share: the turn id in the custom_id, rebuilt from it after a restart, and
    a callback that defers, acts on the turn (subclasses' `act`) and reports any refusal. Only the
    subclasses, each with its own template, are registered."""

    look: buttons.TurnButton  # its label, style and custom_id (bot.buttons)

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
        with use_locale(await interaction_locale.public_for(interaction)):  # stored on the turn, shown to the channel's players
            # TRANSLATORS: why a turn was cancelled, stored on it; %(name)s is the member who cancelled it
            stored = _("cancelled by %(name)s", name=interaction.user.display_name)
        async with bot.db.sessions.begin() as s:
            turn = await _turn_to_act_on(s, interaction, self.turn_id, "cancel")
            await bot.queue.cancel_queued_turn(s, turn, stored)
            await _audit_if_moderator(s, interaction, turn, "cancel_turn")
        # Shown on the public status message: rendered there, in the server's language.
        note = L_("Cancelled by %(name)s.", name=esc(interaction.user.display_name))
        bot.board.spawn(bot.board.finish(turn, "cancelled", note=note), f"close-turn-{turn.id}")
        return _("Turn #%(seq)s is cancelled.", seq=turn.seq)


class RegenerateButton(_TurnButton, template=buttons.REGENERATE.template):
    """On a posted turn: its author or a moderator generates the session's latest turn (cancelled
    ones do not count) again with a new seed (its effect on the characters is undone first)."""

    look = buttons.REGENERATE

    async def act(self, interaction: discord.Interaction[AnimeGamerBot], bot: AnimeGamerBot) -> str:
        async with bot.db.sessions.begin() as s:
            turn = await _turn_to_act_on(s, interaction, self.turn_id, "regenerate")
            gs = await game_sessions.session_by_id(s, turn.session_id)
            live = await game_sessions.live_session(s, gs.channel_id)
            if live is None or live.id != gs.id:
                raise GameEnded()
            latest = await turn_reads.latest_turn(s, gs.id)
            if latest is None:  # every turn was cancelled: this button's turn too, after it was regenerated
                raise NoTurnToRegenerate()
            if latest.id != turn.id:
                raise NotLatestTurn(turn.seq, latest.seq)
            # The take's message (its status message, edited into the post; the post may be
            # visible a moment before it is recorded).
            old_message = turn.posted_message_id or turn.status_message_id
            turn = await turn_service.regenerate_latest(s, gs, bot.queue.enqueue)
            position = await bot.queue.position(s, turn)
            await _audit_if_moderator(s, interaction, turn, "regenerate_turn")
        # The new take's status message first (the notifier waits for it rather than send a
        # message of its own); the old take stays in the channel, without its button.
        await bot.board.announce_queued(turn, position, regenerated=True)
        if old_message:
            bot.board.spawn(bot.board.strip_buttons(gs.channel_id, old_message), f"strip-{old_message}")
        return _("Turn #%(seq)s is being generated again with a new seed.", seq=turn.seq)
