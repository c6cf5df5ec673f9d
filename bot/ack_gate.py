"""Acknowledgements as commands and buttons ask for them (bot.ack_order says how they are sent):
`think` is every button's first step, `@answers_itself` marks a command whose handler gives the
first answer itself (the tree acknowledges every other command before its look-up)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord

from bot import ack_order

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


def answers_itself(func):
    """Marks a command whose handler gives the first answer itself (not acknowledged by the tree)."""
    setattr(func, ack_order.ANSWERS_ITSELF, True)
    return func


async def think(interaction: discord.Interaction[AnimeGamerBot]) -> None:
    """Acknowledge privately ("thinking" until the answer follows), then yield to the
    acknowledgements still in flight (bot.ack_order)."""
    await ack_order.acknowledge(interaction, interaction.client.interaction_meter.gate)
