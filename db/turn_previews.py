"""Previews of a running turn's clip: whether its server wants them, and the latest still.

The worker stores each still on the turn with its progress (db.turn_results.record_progress),
whose NOTIFY carries only the preview's number: a NOTIFY payload is limited to 8000 bytes, and
the still (up to 48 KiB) is read once by each listener that shows it (the bot's status message,
the play page's event stream). The turn holds only its latest still, cleared when it ends, so the
column costs nothing once turns are done.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import GameSession, GuildSettings, Turn


async def wanted(s: AsyncSession, turn_id: int, default: bool) -> bool:
    """Whether the turn's server shows previews: its /admin previews choice, else `default`
    (the operator's ANIMEGAMER_PREVIEWS)."""
    choice = await s.scalar(
        select(GuildSettings.previews)
        .join(GameSession, GameSession.guild_id == GuildSettings.guild_id)
        .join(Turn, Turn.session_id == GameSession.id)
        .where(Turn.id == turn_id)
    )
    return default if choice is None else bool(choice)


async def latest(s: AsyncSession, turn_id: int) -> tuple[int, bytes] | None:
    """The running turn's latest preview (its number, the WebP), or None."""
    row = (await s.execute(select(Turn.preview_no, Turn.preview).where(Turn.id == turn_id, Turn.status == "running"))).first()
    if row is None or row.preview is None or row.preview_no is None:
        return None
    return int(row.preview_no), bytes(row.preview)
