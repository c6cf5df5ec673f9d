"""A server's own content filter (/admin filter add|remove|list): blocked terms in AutoMod's
wildcard syntax, validated by game.content_rules.parse_term, at most MAX_TERMS per server.

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
from game.content_errors import FilterFull, FilterTermExists, FilterTermRefused, FilterTermUnknown
from game.content_rules import MAX_TERMS, SERVER_FILTER, RuleSet, TermRefused, parse_term


def _term(raw: str) -> str:
    try:
        return parse_term(raw)
    except TermRefused as e:
        raise FilterTermRefused(e.term, e.lazy_reason) from None


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


async def rule_set(s: AsyncSession, guild_id: int) -> RuleSet | None:
    """The server's filter as a rule set; None when it has no terms."""
    return as_rule_set(await terms(s, guild_id))


async def add(s: AsyncSession, guild_id: int, raw: str, added_by: int) -> str:
    """Add one term; returns it as stored (normalised). Refuses a bad term, a duplicate, a full filter."""
    require_id(guild_id, "server id")
    require_id(added_by, "user id")
    term = _term(raw)
    # One writer at a time per server, so two adds cannot both pass the count.
    await s.execute(select(func.pg_advisory_xact_lock(guild_id)))
    count = await s.scalar(select(func.count()).select_from(ContentFilterTerm).where(ContentFilterTerm.guild_id == guild_id))
    stmt = insert(ContentFilterTerm).values(guild_id=guild_id, term=term, added_by=added_by).on_conflict_do_nothing()
    if (count or 0) >= MAX_TERMS:
        exists = await s.scalar(select(ContentFilterTerm.id).where(ContentFilterTerm.guild_id == guild_id, ContentFilterTerm.term == term))
        raise FilterTermExists(term) if exists else FilterFull(MAX_TERMS)
    if (await s.execute(stmt.returning(ContentFilterTerm.id))).scalar() is None:
        raise FilterTermExists(term)
    await notify.notify(s, notify.CONFIG_CHANGED, guild_id=guild_id)
    return term


async def remove(s: AsyncSession, guild_id: int, raw: str) -> str:
    """Remove one term (typed as added: it is normalised the same way); FilterTermUnknown if absent."""
    require_id(guild_id, "server id")
    term = _term(raw)
    q = delete(ContentFilterTerm).where(ContentFilterTerm.guild_id == guild_id, ContentFilterTerm.term == term)
    if (await s.execute(q.returning(ContentFilterTerm.id))).scalar() is None:
        raise FilterTermUnknown(term)
    await notify.notify(s, notify.CONFIG_CHANGED, guild_id=guild_id)
    return term
