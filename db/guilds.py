"""Guild and channel configuration: film, playable cast, roles, limits.

Limits: the operator's settings are the loosest a guild may play with. A guild admin can only
tighten them (a longer cooldown, a smaller backlog, shorter instructions); a looser value is
stored as asked but clamped wherever limits are read, so it never applies, and the admin is told
the value that does.
"""

from __future__ import annotations

from sqlalchemy import false, func, literal, null, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from db import content_filters, notify
from db.bounds import fits_bigint, require_id
from db.models import ChannelSettings, GuildSettings
from game.catalogue import FILMS, Film
from game.channel_config import ChannelConfig, Limits
from game.operator_rules import operator_rules
from settings import Settings
from settings.limits import SERVER_LIMITS


async def channel_config(s: AsyncSession, settings: Settings, guild_id: int, channel_id: int) -> ChannelConfig:
    # One round trip (every command and cache load reads this): the guild's row and the channel's,
    # each there or not, and the server's filter terms. An id no row can have has nothing
    # configured (and must not reach the query).
    guild_ok, channel_ok = fits_bigint(guild_id), fits_bigint(channel_id)
    one = select(literal(1).label("one")).subquery("one")
    q = (
        select(GuildSettings, ChannelSettings, content_filters.terms_array(guild_id) if guild_ok else null())
        .select_from(one)
        .outerjoin(GuildSettings, GuildSettings.guild_id == guild_id if guild_ok else false())
        .outerjoin(ChannelSettings, ChannelSettings.channel_id == channel_id if channel_ok else false())
    )
    g, c, terms = (await s.execute(q)).one()
    # A channel with its own film has its own cast; otherwise the guild's film and cast apply.
    source = c if c is not None and c.film_id else g
    film_id = source.film_id if source is not None else None
    playable = source.playable if source is not None else None
    return ChannelConfig(
        film=FILMS.get(film_id) if film_id else None,
        playable=None if playable is None else frozenset(playable),
        admin_role_ids=frozenset(g.admin_role_ids if g else ()),
        moderator_role_ids=frozenset(g.moderator_role_ids if g else ()),
        limits=Limits.of(settings) if g is None else Limits.of(settings).tightened(
            max_instruction_len=g.max_instruction_len, cooldown_seconds=g.cooldown_seconds, backlog_cap=g.backlog_cap
        ),
        content_rules=tuple(r for r in (operator_rules(), content_filters.as_rule_set(terms or ())) if r is not None),
        language=(c.language if c is not None and c.language else None) or (g.language if g is not None else None),
    )


async def _upsert(s: AsyncSession, model, key: dict, values: dict) -> None:
    """Every settings write goes through here, and tells other processes (their caches) at commit."""
    stmt = insert(model).values(**key, **values)
    stmt = stmt.on_conflict_do_update(index_elements=list(key), set_={**values, "updated_at": func.now()})
    await s.execute(stmt)
    await notify.notify(s, notify.CONFIG_CHANGED, guild_id=key.get("guild_id", values.get("guild_id")))


async def set_film(s: AsyncSession, guild_id: int, film_id: str, channel_id: int | None = None) -> Film:
    """Choose the film of a guild, or of one channel when `channel_id` is given (the caller
    checked `film_id`: service.configs.film_or_error). The playable cast is reset to the new
    film's whole cast."""
    film = FILMS.get(film_id)
    if film is None:
        raise ValueError(f"{film_id!r} is no film of the catalogue (the service checks it first)")
    require_id(guild_id, "server id")
    if channel_id is None:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"film_id": film.id, "playable": None})
    else:
        require_id(channel_id, "channel id")
        await _upsert(s, ChannelSettings, {"channel_id": channel_id}, {"guild_id": guild_id, "film_id": film.id, "playable": None})
    return film


async def set_language(s: AsyncSession, guild_id: int, language: str | None, channel_id: int | None = None) -> None:
    """The locale of the server's (or one channel's) public posts: a shipped catalog's name (the
    service checks it), or None to follow the server's Discord language (a channel: the server's
    choice)."""
    require_id(guild_id, "server id")
    if channel_id is None:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"language": language})
    else:
        require_id(channel_id, "channel id")
        await _upsert(s, ChannelSettings, {"channel_id": channel_id}, {"guild_id": guild_id, "language": language})


async def set_previews(s: AsyncSession, guild_id: int, on: bool | None) -> None:
    """Whether the server's turns show previews of their clip while they run (None: the operator's
    default, ANIMEGAMER_PREVIEWS); read by the worker at each turn's start (db.turn_previews)."""
    require_id(guild_id, "server id")
    await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"previews": on})


async def set_playable(s: AsyncSession, guild_id: int, channel_id: int, playable: list[str]) -> None:
    """The playable cast (character ids) where the film is configured: the channel, if it has a
    film of its own, else the guild."""
    require_id(guild_id, "server id")
    require_id(channel_id, "channel id")
    c = await s.get(ChannelSettings, channel_id)
    if c is not None and c.film_id:
        await _upsert(s, ChannelSettings, {"channel_id": channel_id}, {"guild_id": guild_id, "playable": playable})
    else:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"playable": playable})


async def set_roles(
    s: AsyncSession, guild_id: int, *, admin_role_ids: list[int] | None = None, moderator_role_ids: list[int] | None = None
) -> None:
    require_id(guild_id, "server id")
    for r in (*(admin_role_ids or ()), *(moderator_role_ids or ())):
        require_id(r, "role id")
    values = {}
    if admin_role_ids is not None:
        values["admin_role_ids"] = admin_role_ids
    if moderator_role_ids is not None:
        values["moderator_role_ids"] = moderator_role_ids
    if values:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, values)


# What a guild may store (the operator's settings clamp it further): settings/limits.py's table.
LIMIT_RANGES = {name: (limit.low, limit.high) for name, limit in SERVER_LIMITS.items()}


async def set_limits(s: AsyncSession, settings: Settings, guild_id: int, values: dict[str, float]) -> Limits:
    """Store the guild's limits (`values`: LIMIT_RANGES names, checked against them by the
    service; others unchanged) and return the limits that now apply (a looser value than the
    operator's is stored but never applies: see channel_config)."""
    require_id(guild_id, "server id")
    if values:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, values)
    g = await s.get(GuildSettings, guild_id, populate_existing=True)
    return Limits.of(settings).tightened(
        max_instruction_len=g.max_instruction_len if g else None,
        cooldown_seconds=g.cooldown_seconds if g else None,
        backlog_cap=g.backlog_cap if g else None,
    )
