"""The moderation log channel of a server (/admin log-channel): where audited actions, refused
instructions, removals and reports are posted (bot.answers.modlog). One column of guild_settings."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.bounds import require_id
from db.guilds import _upsert
from db.models import GuildSettings


async def set_log_channel(s: AsyncSession, guild_id: int, channel_id: int | None) -> None:
    """Set the server's log channel, or turn the log off (None)."""
    require_id(guild_id, "server id")
    if channel_id is not None:
        require_id(channel_id, "channel id")
    await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"log_channel_id": channel_id})


async def log_channel(s: AsyncSession, guild_id: int) -> int | None:
    """The server's log channel id, None when it has none."""
    return await s.scalar(select(GuildSettings.log_channel_id).where(GuildSettings.guild_id == guild_id))
