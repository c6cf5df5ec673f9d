"""The audit log of admin and moderator actions."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db import notify
from db.bounds import TARGET_LEN, clean_json, free_text, name_text, require_id
from db.models import AuditLog


async def record(
    s: AsyncSession,
    *,
    guild_id: int,
    actor_id: int,
    actor_name: str,
    action: str,
    channel_id: int | None = None,
    target: str | None = None,
    details: dict | None = None,
) -> AuditLog:
    row = AuditLog(
        guild_id=require_id(guild_id, "server id"),
        channel_id=None if channel_id is None else require_id(channel_id, "channel id"),
        actor_id=require_id(actor_id, "user id"),
        actor_name=name_text(actor_name),
        action=action,
        target=None if target is None else free_text(str(target), TARGET_LEN),
        details=clean_json(details or {}),
    )
    s.add(row)
    await s.flush()
    # The moderation log (bot.answers.modlog) hears every entry at commit, and none that was rolled back.
    await notify.notify(s, notify.AUDIT_RECORDED, audit_id=row.id, guild_id=row.guild_id)
    return row


async def entry(s: AsyncSession, audit_id: int) -> AuditLog | None:
    return await s.get(AuditLog, audit_id)


async def recent(s: AsyncSession, guild_id: int, limit: int = 20) -> list[AuditLog]:
    q = select(AuditLog).where(AuditLog.guild_id == guild_id).order_by(AuditLog.id.desc()).limit(limit)
    return list((await s.scalars(q)).all())
