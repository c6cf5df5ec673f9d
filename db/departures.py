"""Servers the bot was removed from: their data is kept `guild_data_days` (ANIMEGAMER_GUILD_DATA_DAYS)
in case the bot is added back, then deleted by the bot's scheduled job.

Deleting a server's data deletes every row of every table with a `guild_id` column (settings,
channels, sessions, the audit log, vote channels and rounds, privacy tombstones, and whatever
table a later revision adds with that column); a session's players, character states, turns
(with their clips) and vote proposals and ballots go with it (ON DELETE CASCADE). The fair order's
place of each of its channels (queue_channels, keyed by channel, not server) goes first, while the
sessions still say which channels were the server's."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from db.bounds import require_id
from db.claims import GuildClaim, claimed
from db.dml import rowcount
from db.models import Base, GameSession, GuildDeparture, QueueChannel


async def record_departure(s: AsyncSession, guild_id: int, keep_days: float, *, now: datetime | None = None) -> GuildDeparture:
    """The bot left `guild_id`: its data goes after `keep_days`. Leaving again keeps the first date."""
    require_id(guild_id, "server id")
    now = now or datetime.now(UTC)
    await s.execute(
        insert(GuildDeparture)
        .values(guild_id=guild_id, left_at=now, delete_after=now + timedelta(days=keep_days))
        .on_conflict_do_nothing()
    )
    row = await s.get(GuildDeparture, guild_id, populate_existing=True)
    assert row is not None
    return row


async def cancel_departures(s: AsyncSession, guild_ids: Collection[int]) -> list[int]:
    """The bot is (back) in these servers: their data stays. The ids whose deletion was cancelled."""
    if not guild_ids:
        return []
    q = delete(GuildDeparture).where(GuildDeparture.guild_id.in_(list(guild_ids))).returning(GuildDeparture.guild_id)
    return list((await s.scalars(q)).all())


async def due(s: AsyncSession, *, now: datetime | None = None, claim: GuildClaim | None = None) -> list[int]:
    """Servers whose data is due for deletion, locked (SKIP LOCKED: one deleter per server); only
    `claim`'s servers when given (a bot process deletes only its shards' servers: the process of
    a server's shard cancels the deletion first if the bot was added back while it was away)."""
    q = (
        select(GuildDeparture.guild_id)
        .where(GuildDeparture.delete_after <= (now or func.now()), claimed(GuildDeparture.guild_id, claim))
        .order_by(GuildDeparture.delete_after)
        .with_for_update(skip_locked=True)
    )
    return list((await s.scalars(q)).all())


def _guild_tables():
    """Every table with a guild_id column, children before parents; the departures last."""
    tables = [t for t in reversed(Base.metadata.sorted_tables) if "guild_id" in t.c and t.name != GuildDeparture.__tablename__]
    return [*tables, GuildDeparture.__table__]


async def delete_guild_data(s: AsyncSession, guild_id: int) -> dict[str, int]:
    """Every row of the server, in the caller's transaction; rows deleted per table (cascades not counted)."""
    counts: dict[str, int] = {}
    channels = select(GameSession.channel_id).where(GameSession.guild_id == guild_id)
    n = await rowcount(s, delete(QueueChannel).where(QueueChannel.channel_id.in_(channels)))
    if n:
        counts[QueueChannel.__tablename__] = n
    for table in _guild_tables():
        n = await rowcount(s, delete(table).where(table.c.guild_id == guild_id))
        if n:
            counts[table.name] = n
    return counts


# Discord ids are snowflakes far above this; smaller ids are local guilds (the play page's is 1).
MIN_DISCORD_ID = 1 << 22


async def unknown_guilds(s: AsyncSession, present: Collection[int], claim: GuildClaim | None = None) -> list[int]:
    """Discord servers with data that the bot is not in and that have no departure yet: it was
    removed while it was offline (no GUILD_DELETE reached it). Only meaningful with the complete
    list of the servers of `claim` (after READY): a bot process running some of the shards
    knows only their servers, and must pass its claim (bot.parts.shards.ShardClaim) so that the
    other shards' servers are not taken for servers that removed the bot. None: every server
    (one process runs every shard)."""
    known = select(GuildDeparture.guild_id)
    ids: set[int] = set()
    for table in _guild_tables()[:-1]:
        q = select(table.c.guild_id).distinct().where(
            table.c.guild_id >= MIN_DISCORD_ID, table.c.guild_id.not_in(known), claimed(table.c.guild_id, claim)
        )
        ids.update((await s.scalars(q)).all())
    return sorted(ids - set(present))


async def session_ids(s: AsyncSession, guild_id: int) -> list[int]:
    return list((await s.scalars(select(GameSession.id).where(GameSession.guild_id == guild_id))).all())
