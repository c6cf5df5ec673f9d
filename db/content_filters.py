"""A server's own content filter (/admin filter add|remove|list): blocked terms in AutoMod's
wildcard syntax, at most MAX_TERMS per server. The rows; the checks (a valid term, not there yet,
room left, there to remove) and their refusals are service.admin's.

Every write sends `animegamer_config_changed`, so cached channel configurations (which carry the
filter as a rule set, db.guilds.channel_config) are dropped in every process.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import aggregate_order_by, array_agg, insert
from sqlalchemy.ext.asyncio import AsyncSession

from db import notify
from db.bounds import fits_bigint, require_id
from db.models import ContentFilterTerm
from game.content_rules import SERVER_FILTER, RuleSet


async def terms(s: AsyncSession, guild_id: int) -> list[str]:
    """The server's terms, oldest first (none for an id no row can have)."""
    if not fits_bigint(guild_id):
        return []
    q = select(ContentFilterTerm.term).where(ContentFilterTerm.guild_id == guild_id).order_by(ContentFilterTerm.id)
    return list((await s.scalars(q)).all())


def terms_array(guild_id: int):
    """The server's terms, oldest first, as one array column for a larger query (NULL when it has
    none): db.guilds.channel_config reads them with the guild's and channel's settings."""
    q = select(array_agg(aggregate_order_by(ContentFilterTerm.term, ContentFilterTerm.id)))
    return q.where(ContentFilterTerm.guild_id == guild_id).scalar_subquery()


def as_rule_set(found: Sequence[str]) -> RuleSet | None:
    """Terms as the server's filter rule set; None when there are none."""
    return RuleSet(SERVER_FILTER, tuple(found)) if found else None


async def lock_terms(s: AsyncSession, guild_id: int) -> None:
    """One writer of the server's filter at a time, until the transaction ends: two adds cannot
    both find room for one more term."""
    require_id(guild_id, "server id")
    await s.execute(select(func.pg_advisory_xact_lock(guild_id)))


async def count(s: AsyncSession, guild_id: int) -> int:
    return await s.scalar(select(func.count()).select_from(ContentFilterTerm).where(ContentFilterTerm.guild_id == guild_id)) or 0


async def has(s: AsyncSession, guild_id: int, term: str) -> bool:
    q = select(ContentFilterTerm.id).where(ContentFilterTerm.guild_id == guild_id, ContentFilterTerm.term == term)
    return await s.scalar(q) is not None


async def add(s: AsyncSession, guild_id: int, term: str, added_by: int) -> None:
    """Add one term (normalised and checked by the caller, under lock_terms)."""
    require_id(guild_id, "server id")
    require_id(added_by, "user id")
    await s.execute(insert(ContentFilterTerm).values(guild_id=guild_id, term=term, added_by=added_by).on_conflict_do_nothing())
    await notify.notify(s, notify.CONFIG_CHANGED, guild_id=guild_id)


async def remove(s: AsyncSession, guild_id: int, term: str) -> bool:
    """Remove one term (normalised by the caller); False if the server had no such term."""
    require_id(guild_id, "server id")
    q = delete(ContentFilterTerm).where(ContentFilterTerm.guild_id == guild_id, ContentFilterTerm.term == term)
    if (await s.execute(q.returning(ContentFilterTerm.id))).scalar() is None:
        return False
    await notify.notify(s, notify.CONFIG_CHANGED, guild_id=guild_id)
    return True
