"""Audit-log entries for actions taken through Discord: the actor and place come from the interaction."""

from __future__ import annotations

import discord

from db import audit


async def record(s, interaction: discord.Interaction, action: str, target: str | None = None, **details) -> None:
    await audit.record(
        s,
        guild_id=interaction.guild_id,
        channel_id=interaction.channel_id,
        actor_id=interaction.user.id,
        actor_name=interaction.user.display_name,
        action=action,
        target=target,
        details=details,
    )
