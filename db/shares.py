"""A server's share of the GPU as stored: the operator's weight and quotas (each change kept with
who made it), the turns counted against a quota, and the usage per server per day.

The fair order that reads the weights is the queue's (inference/procrastinate_adapter.py); the
quota checks and their refusals are the service's (service/quotas.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from db.bounds import name_text, require_id
from db.models import GuildShare, GuildShareChange, GuildUsage

WINDOW = timedelta(hours=1)  # quotas count the turns of the last hour, a rolling window


@dataclass(frozen=True)
class Share:
    """What the operator set for a server (the defaults where nothing was set)."""

    weight: float = 1.0
    turns_per_hour: int | None = None  # None: the settings' default
    member_turns_per_hour: int | None = None

    def as_dict(self) -> dict:
        return {"weight": self.weight, "turns_per_hour": self.turns_per_hour,
                "member_turns_per_hour": self.member_turns_per_hour}


async def share(s: AsyncSession, guild_id: int) -> Share:
    row = await s.get(GuildShare, guild_id)
    return Share() if row is None else Share(row.weight, row.turns_per_hour, row.member_turns_per_hour)


async def set_share(s: AsyncSession, guild_id: int, actor: str, new: Share) -> Share:
    """Store a server's share and keep the change (before, after, who) in guild_share_changes;
    returns the share it had before."""
    before = await share(s, require_id(guild_id, "server id"))
    row = await s.get(GuildShare, guild_id, with_for_update=True)
    if row is None:
        row = GuildShare(guild_id=guild_id)
        s.add(row)
    row.weight, row.turns_per_hour, row.member_turns_per_hour = new.weight, new.turns_per_hour, new.member_turns_per_hour
    row.updated_at = datetime.now().astimezone()
    s.add(GuildShareChange(guild_id=guild_id, actor=name_text(actor), before=before.as_dict(), after=new.as_dict()))
    await s.flush()
    return before


async def changes(s: AsyncSession, guild_id: int, limit: int = 10) -> list[GuildShareChange]:
    q = (select(GuildShareChange).where(GuildShareChange.guild_id == guild_id)
         .order_by(GuildShareChange.id.desc()).limit(limit))
    return list((await s.scalars(q)).all())


async def shared_servers(s: AsyncSession) -> list[tuple[int, Share]]:
    rows = (await s.scalars(select(GuildShare).order_by(GuildShare.guild_id))).all()
    return [(r.guild_id, Share(r.weight, r.turns_per_hour, r.member_turns_per_hour)) for r in rows]


# --- what a quota counts: turns started by players in the last hour (cancelled ones excepted)

_RECENT = """
SELECT t.created_at FROM turns t JOIN game_sessions g ON g.id = t.session_id
 WHERE g.guild_id = :guild AND t.status <> 'cancelled' AND t.created_at > now() - make_interval(secs => :window)
   {member}
 ORDER BY t.created_at
"""


async def recent_turns(s: AsyncSession, guild_id: int, author_id: int | None = None) -> list[datetime]:
    """When each of the server's (or one member's there) turns of the last hour was submitted,
    oldest first."""
    sql = _RECENT.format(member="AND t.author_id = :author" if author_id is not None else "")
    params: dict = {"guild": guild_id, "window": WINDOW.total_seconds()}
    if author_id is not None:
        params["author"] = author_id
    return list((await s.scalars(text(sql), params)).all())


async def lock_quota(s: AsyncSession, guild_id: int) -> None:
    """Serialise a server's quota checks until the transaction ends (two channels acting at once
    cannot both take the last turn)."""
    await s.execute(text("SELECT pg_advisory_xact_lock(7061639, CAST(CAST(:g AS bigint) % 2147483647 AS integer))"), {"g": guild_id})


async def now(s: AsyncSession) -> datetime:
    """The database's clock, which turns' created_at are written with."""
    return await s.scalar(text("SELECT now()"))


# --- usage: turns and GPU seconds per server per UTC day


async def record_usage(s: AsyncSession, guild_id: int, started_at: datetime) -> None:
    """One more turn run for `guild_id` today, its GPU time from `started_at` to now."""
    await s.execute(text(
        """
        INSERT INTO guild_usage (guild_id, day, turns, gpu_seconds)
        VALUES (:g, (now() AT TIME ZONE 'UTC')::date, 1, greatest(0, extract(epoch FROM now() - :started)))
        ON CONFLICT (guild_id, day) DO UPDATE
           SET turns = guild_usage.turns + 1, gpu_seconds = guild_usage.gpu_seconds + EXCLUDED.gpu_seconds
        """), {"g": guild_id, "started": started_at})


@dataclass(frozen=True)
class Usage:
    guild_id: int
    day: date
    turns: int
    gpu_seconds: float


async def usage(s: AsyncSession, guild_id: int | None, days: int) -> list[Usage]:
    """The last `days` UTC days (today included) of one server's usage, or every server's
    (guild_id None), newest day first, then the busiest."""
    q = (select(GuildUsage)
         .where(GuildUsage.day > text("(now() AT TIME ZONE 'UTC')::date - CAST(:days AS integer)").bindparams(days=days))
         .order_by(GuildUsage.day.desc(), GuildUsage.gpu_seconds.desc()))
    if guild_id is not None:
        q = q.where(GuildUsage.guild_id == guild_id)
    return [Usage(r.guild_id, r.day, r.turns, r.gpu_seconds) for r in (await s.scalars(q)).all()]
