"""Guild and channel configuration: film, playable cast, roles, limits."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from settings import Settings
from db import notify
from db.models import ChannelSettings, GuildSettings
from game.catalogue import FILMS, Film
from game.errors import GameError, NoFilm, UnknownCharacter, UnknownFilm


@dataclass(frozen=True)
class Limits:
    max_instruction_len: int
    cooldown_seconds: float
    backlog_cap: int


@dataclass(frozen=True)
class ChannelConfig:
    """What applies in one channel: the channel's settings over the guild's over the app's."""

    film: Film | None
    playable: frozenset[str] | None  # character ids; None = the film's whole cast
    admin_role_ids: frozenset[int]
    moderator_role_ids: frozenset[int]
    limits: Limits

    def cast(self) -> list:
        if self.film is None:
            return []
        return [c for c in self.film.characters if self.playable is None or c.id in self.playable]


def film_or_error(film_id: str) -> Film:
    if film_id not in FILMS:
        raise UnknownFilm(film_id, sorted(FILMS))
    return FILMS[film_id]


async def channel_config(s: AsyncSession, settings: Settings, guild_id: int, channel_id: int) -> ChannelConfig:
    g = await s.get(GuildSettings, guild_id)
    c = await s.get(ChannelSettings, channel_id)
    # A channel with its own film has its own cast; otherwise the guild's film and cast apply.
    source = c if c is not None and c.film_id else g
    film_id = source.film_id if source is not None else None
    playable = source.playable if source is not None else None
    return ChannelConfig(
        film=FILMS.get(film_id) if film_id else None,
        playable=None if playable is None else frozenset(playable),
        admin_role_ids=frozenset(g.admin_role_ids if g else ()),
        moderator_role_ids=frozenset(g.moderator_role_ids if g else ()),
        limits=Limits(
            max_instruction_len=(g and g.max_instruction_len) or settings.max_instruction_len,
            cooldown_seconds=settings.cooldown_seconds if not g or g.cooldown_seconds is None else g.cooldown_seconds,
            backlog_cap=(g and g.backlog_cap) or settings.backlog_cap,
        ),
    )


async def _upsert(s: AsyncSession, model, key: dict, values: dict) -> None:
    """Every settings write goes through here, and tells other processes (their caches) at commit."""
    stmt = insert(model).values(**key, **values)
    stmt = stmt.on_conflict_do_update(index_elements=list(key), set_={**values, "updated_at": func.now()})
    await s.execute(stmt)
    await notify.notify(s, notify.CONFIG_CHANGED, guild_id=key.get("guild_id", values.get("guild_id")))


async def set_film(s: AsyncSession, guild_id: int, film_id: str, channel_id: int | None = None) -> Film:
    """Choose the film of a guild, or of one channel when `channel_id` is given.

    The playable cast is reset to the new film's whole cast."""
    film = film_or_error(film_id)
    if channel_id is None:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"film_id": film.id, "playable": None})
    else:
        await _upsert(s, ChannelSettings, {"channel_id": channel_id}, {"guild_id": guild_id, "film_id": film.id, "playable": None})
    return film


async def set_character_enabled(
    s: AsyncSession, settings: Settings, guild_id: int, channel_id: int, character: str, enabled: bool
) -> frozenset[str]:
    """Enable or disable one character where the film is configured (channel or guild)."""
    cfg = await channel_config(s, settings, guild_id, channel_id)
    if cfg.film is None:
        raise NoFilm()
    ch = cfg.film.character(character)
    if ch is None:
        raise UnknownCharacter(character, [c.name for c in cfg.film.characters])
    current = set(cfg.playable if cfg.playable is not None else (c.id for c in cfg.film.characters))
    (current.add if enabled else current.discard)(ch.id)
    value = sorted(current)
    c = await s.get(ChannelSettings, channel_id)
    if c is not None and c.film_id:
        await _upsert(s, ChannelSettings, {"channel_id": channel_id}, {"guild_id": guild_id, "playable": value})
    else:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"playable": value})
    return frozenset(value)


async def set_roles(
    s: AsyncSession, guild_id: int, *, admin_role_ids: list[int] | None = None, moderator_role_ids: list[int] | None = None
) -> None:
    values = {}
    if admin_role_ids is not None:
        values["admin_role_ids"] = admin_role_ids
    if moderator_role_ids is not None:
        values["moderator_role_ids"] = moderator_role_ids
    if values:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, values)


async def set_limits(
    s: AsyncSession,
    guild_id: int,
    *,
    max_instruction_len: int | None = None,
    cooldown_seconds: float | None = None,
    backlog_cap: int | None = None,
) -> None:
    """Set the guild's limits (the values given; others unchanged)."""
    checks = {
        "max_instruction_len": (max_instruction_len, 40, 2000),
        "cooldown_seconds": (cooldown_seconds, 0, 3600),
        "backlog_cap": (backlog_cap, 1, 100),
    }
    values = {}
    for name, (v, lo, hi) in checks.items():
        if v is None:
            continue
        if not lo <= v <= hi:
            raise GameError(f"{name} must be between {lo} and {hi}.")
        values[name] = v
    if values:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, values)
