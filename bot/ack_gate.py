"""Acknowledgements as commands and buttons ask for them (bot.ack_order says how they are sent):
`think` is every button's first step, `@answers_itself` marks a command whose handler gives the
first answer itself (the tree acknowledges every other command before its look-up)."""

from __future__ import annotations

import discord

from bot import ack_order, context


def answers_itself(func):
    """Marks a command whose handler gives the first answer itself (not acknowledged by the tree)."""
    setattr(func, ack_order.ANSWERS_ITSELF, True)
    return func


async def think(interaction: discord.Interaction) -> None:
    """Acknowledge privately ("thinking" until the answer follows), then yield to the
    acknowledgements still in flight (bot.ack_order)."""
    await ack_order.acknowledge(interaction, context.bot_of(interaction).interaction_meter.gate)
