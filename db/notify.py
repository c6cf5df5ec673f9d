"""Postgres NOTIFY channels and payloads: the one place their names and shapes are defined.

Payloads are small JSON objects; listeners re-read the rows they name (a NOTIFY can be missed
while a listener is down, so the bot also sweeps periodically).
"""

from __future__ import annotations

import json

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

TURN_FINISHED = "animegamer_turn_finished"  # done or failed: {"turn_id", "session_id", "channel_id", "status"}
TURN_PROGRESS = "animegamer_turn_progress"  # {"turn_id", "session_id", "channel_id", "progress", "stage"[, "preview": its number]}
TURN_QUEUED = "animegamer_turn_queued"  # {"turn_id", "session_id", "channel_id"}; also on cancel
SESSION_CHANGED = "animegamer_session_changed"  # {"session_id", "channel_id", "event"}
CONFIG_CHANGED = "animegamer_config_changed"  # guild or channel settings written: {"guild_id"}
AUDIT_RECORDED = "animegamer_audit_recorded"  # an audit entry written (db.audit.record): {"audit_id", "guild_id"}

CHANNELS = (TURN_FINISHED, TURN_PROGRESS, TURN_QUEUED, SESSION_CHANGED, CONFIG_CHANGED)


async def notify(s: AsyncSession, channel: str, **payload) -> None:
    """Queue a NOTIFY in the current transaction (delivered at commit, dropped on rollback)."""
    await s.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel, "p": json.dumps(payload)})
