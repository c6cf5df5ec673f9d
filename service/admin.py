"""Admins' actions on a server's game: the film and the playable cast, and the server's settings
(limits, the bot's roles, the filter, the moderation log, the language of public posts, previews).
Each change is audited in its transaction (service.deps.Deps.record)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from db import audit, content_filters, guilds, modlog, sessions
from db.models import ChannelSettings, GuildSettings
from game.catalogue import Film
from game.channel_config import ChannelConfig, Limits
from game.content_errors import FilterFull, FilterTermExists, FilterTermRefused, FilterTermUnknown
from game.content_rules import MAX_TERMS, TermRefused, parse_term
from game.errors import NoFilm
from game.session_errors import UnknownCharacter
from service.configs import config, film_or_error, limit_values, require_language
from service.deps import Deps, Member, Place
from service.moderation import reset_session
from service.modlog import AuditEntry
from service.shares import ServerShare, server_share


async def set_film(deps: Deps, place: Place, who: Member, film: str, *, channel_only: bool = False,
                   restart: bool = False) -> Film:
    """The film new games use, on the server (or only in this channel). `restart`: a game in
    progress with another film is reset into the new one, and its players leave (the cast changes)."""
    chosen = film_or_error(film)
    async with deps.sessions.begin() as s:
        await guilds.set_film(s, place.guild_id, chosen.id, channel_id=place.channel_id if channel_only else None)
        await deps.record(s, place, who, "set_film", chosen.id, scope="channel" if channel_only else "server")
        gs = await sessions.live_session(s, place.channel_id, lock=True) if restart else None
        if gs is not None and gs.film_id != chosen.id:
            fresh, _cancelled = await reset_session(deps, s, gs, who)
            for p in await sessions.players(s, fresh.id):
                await sessions.leave(s, fresh, p)
            fresh.film_id = chosen.id
            await s.flush()
    return chosen


async def set_character(deps: Deps, place: Place, who: Member, character: str,
                        enabled: bool) -> tuple[frozenset[str], ChannelConfig]:
    """Enable or disable a playable character here; returns the playable ids and the configuration
    after the change."""
    async with deps.sessions.begin() as s:
        cfg = await config(deps, s, place)
        if cfg.film is None:
            raise NoFilm()
        ch = cfg.film.character(character)
        if ch is None:
            raise UnknownCharacter(character, [c.name for c in cfg.film.characters])
        playable = set(cfg.playable if cfg.playable is not None else (c.id for c in cfg.film.characters))
        (playable.add if enabled else playable.discard)(ch.id)
        cast = frozenset(playable)
        await guilds.set_playable(s, place.guild_id, place.channel_id, sorted(cast))
        await deps.record(s, place, who, "enable_character" if enabled else "disable_character", character,
                          cast=sorted(cast))
        return cast, await config(deps, s, place)


# --- the server's settings: limits, the bot's roles, the filter, the moderation log, the
# language of public posts, previews. Each returns what now applies; a face drops its cached
# configuration after it (the bot's ConfigCache; other processes learn it by NOTIFY).

@dataclass(frozen=True)
class LimitsChange:
    """What /admin limits did: the limits that now apply, and the requests that were looser than
    the operator's (name -> (asked, applied))."""

    effective: Limits
    clamped: dict[str, tuple[float, float]]


AUTOMATIC = "auto"  # the language "follow Discord's server language", as the audit log stores it
RoleKind = Literal["admin", "moderator"]


async def set_limits(deps: Deps, place: Place, who: Member, *, cooldown: float | None = None,
                     backlog: int | None = None, max_length: int | None = None) -> LimitsChange:
    """Tighten the server's limits (None: unchanged); looser ones than the operator's never apply
    (the result says which)."""
    values = limit_values(cooldown_seconds=cooldown, backlog_cap=backlog, max_instruction_len=max_length)
    async with deps.sessions.begin() as s:
        effective = await guilds.set_limits(s, deps.settings, place.guild_id, values)
        await deps.record(s, place, who, "set_limits", None, cooldown=cooldown, backlog=backlog, max_length=max_length)
    return LimitsChange(effective, {n: (v, getattr(effective, n)) for n, v in values.items() if getattr(effective, n) != v})


async def set_role(deps: Deps, place: Place, who: Member, kind: RoleKind, role_id: int, role_name: str,
                   enabled: bool) -> list[int]:
    """Give (or take) the bot's admin or moderator rights to a role; the roles that now have them."""
    async with deps.sessions.begin() as s:
        cfg = await config(deps, s, place)
        ids = set(cfg.admin_role_ids if kind == "admin" else cfg.moderator_role_ids)
        (ids.add if enabled else ids.discard)(role_id)
        held = sorted(ids)
        await guilds.set_roles(s, place.guild_id, **{f"{kind}_role_ids": held})
        await deps.record(s, place, who, f"{'add' if enabled else 'remove'}_{kind}_role", str(role_id), role=role_name)
    return held


def _filter_term(raw: str) -> str:
    """A term as the filter stores it (normalised); FilterTermRefused if it is no valid term."""
    try:
        return parse_term(raw)
    except TermRefused as e:
        raise FilterTermRefused(e.term, e.lazy_reason) from None


async def add_filter_term(deps: Deps, place: Place, who: Member, term: str) -> str:
    """Block a word or phrase in the server's instructions; the term as stored (normalised).
    Refused: an invalid term, one already there, a full filter (MAX_TERMS)."""
    added = _filter_term(term)
    async with deps.sessions.begin() as s:
        await content_filters.lock_terms(s, place.guild_id)
        if await content_filters.has(s, place.guild_id, added):
            raise FilterTermExists(added)
        if await content_filters.count(s, place.guild_id) >= MAX_TERMS:
            raise FilterFull(MAX_TERMS)
        await content_filters.add(s, place.guild_id, added, who.id)
        await deps.record(s, place, who, "filter_add", added)
    return added


async def remove_filter_term(deps: Deps, place: Place, who: Member, term: str) -> str:
    """Unblock a term of the server's filter (typed as added); the term as it was stored."""
    removed = _filter_term(term)
    async with deps.sessions.begin() as s:
        if not await content_filters.remove(s, place.guild_id, removed):
            raise FilterTermUnknown(removed)
        await deps.record(s, place, who, "filter_remove", removed)
    return removed


async def filter_terms(deps: Deps, place: Place) -> list[str]:
    async with deps.sessions() as s:
        return await content_filters.terms(s, place.guild_id)


async def set_log_channel(deps: Deps, place: Place, who: Member, channel_id: int | None) -> None:
    """Where the server's moderation log goes (None: off)."""
    async with deps.sessions.begin() as s:
        await modlog.set_log_channel(s, place.guild_id, channel_id)
        await deps.record(s, place, who, "log_channel", None if channel_id is None else str(channel_id))


async def set_language(deps: Deps, place: Place, who: Member, language: str | None,
                       channel_id: int | None = None) -> None:
    """The language of the server's public posts, or of one channel's (`channel_id`); None: the
    server's Discord language (a channel: the server's choice)."""
    require_language(language)
    async with deps.sessions.begin() as s:
        await guilds.set_language(s, place.guild_id, language, channel_id)
        where = {"scope": "server"} if channel_id is None else {"scope": "channel", "channel": str(channel_id)}
        await deps.record(s, place, who, "set_language", language or AUTOMATIC, **where)


async def set_previews(deps: Deps, place: Place, who: Member, on: bool) -> None:
    """Whether the server's turns show their clip forming while it is made."""
    async with deps.sessions.begin() as s:
        await guilds.set_previews(s, place.guild_id, on)
        await deps.record(s, place, who, "previews", "on" if on else "off")


@dataclass(frozen=True)
class Shown:
    """What is configured in a channel, as /admin show tells it."""

    config: ChannelConfig
    recent: list[AuditEntry]  # the server's latest audited actions, newest first
    language: str | None  # the public posts' language chosen here (None: the server's Discord language)
    language_scope: Literal["channel", "server"] | None  # whose choice `language` is
    previews: bool  # whether turns show previews here
    previews_default: bool  # True: no server choice, the operator's default applies
    share: ServerShare  # the server's weight and quotas in force, its last hour and its usage per day


async def shown(deps: Deps, place: Place, recent: int = 10) -> Shown:
    async with deps.sessions() as s:
        cfg = await config(deps, s, place)
        entries = [AuditEntry.of(a) for a in await audit.recent(s, place.guild_id, limit=recent)]
        server = await s.get(GuildSettings, place.guild_id)
        channel = await s.get(ChannelSettings, place.channel_id)
    if channel is not None and channel.language:
        language, scope = channel.language, "channel"
    elif server is not None and server.language:
        language, scope = server.language, "server"
    else:
        language, scope = None, None
    chosen = None if server is None else server.previews
    return Shown(cfg, entries, language, scope, deps.settings.previews if chosen is None else chosen, chosen is None,
                 await server_share(deps, place))
