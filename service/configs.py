"""A channel's configuration as the service reads it (game.channel_config.ChannelConfig: the
film, the cast, the roles, the limits, the content rules, the language), who plays whom in its
live game (what the bot's configuration cache keeps for autocomplete), and the checks on what an
admin asks to store (a film, a language, a limit)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db import guilds, sessions
from game.catalogue import FILMS, Film, find_film
from game.channel_config import ChannelConfig
from game.errors import GameError, UnknownFilm
from i18n import L_
from service.deps import Deps, Place
from settings import Settings


async def config(deps: Deps, s: AsyncSession, place: Place) -> ChannelConfig:
    """What applies in `place`, read in the caller's transaction."""
    return await guilds.channel_config(s, deps.settings, place.guild_id, place.channel_id)


async def channel_config(opened: async_sessionmaker[AsyncSession], settings: Settings, guild_id: int,
                         channel_id: int) -> ChannelConfig:
    """What applies in a channel, in a read of its own (the bot's configuration cache)."""
    async with opened() as s:
        return await guilds.channel_config(s, settings, guild_id, channel_id)


@dataclass(frozen=True)
class LiveCast:
    """A channel's running or paused game, as autocomplete shows it."""

    session_id: int
    film_id: str
    players: dict[str, str]  # character id -> the player's name


async def live_cast(opened: async_sessionmaker[AsyncSession], channel_id: int) -> LiveCast | None:
    """The channel's live game and who plays whom in it (None: no game), in a read of its own."""
    async with opened() as s:
        gs = await sessions.live_session(s, channel_id)
        if gs is None:
            return None
        return LiveCast(gs.id, gs.film_id, {p.character_id: p.user_name for p in await sessions.players(s, gs.id)})


def film_or_error(film_id: str) -> Film:
    """A film by id or by any of its titles (a player may type it in their language)."""
    film = find_film(film_id)
    if film is None:
        raise UnknownFilm(film_id, sorted(FILMS))
    return film


def require_language(language: str | None) -> None:
    """A public posts' language is a shipped catalog (None: the server's Discord language)."""
    from i18n import locales

    if language is not None and language not in locales.shipped():
        raise GameError(L_("Unknown language %(language)s.", language=language))


def limit_values(**asked: float | None) -> dict[str, float]:
    """The limits an admin asked for (None: unchanged), each checked against the range a guild
    may store (db.guilds.LIMIT_RANGES)."""
    values: dict[str, float] = {}
    for name, v in asked.items():
        if v is None:
            continue
        lo, hi = guilds.LIMIT_RANGES[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise GameError(L_("%(name)s must be between %(low)s and %(high)s.", name=name, low=lo, high=hi))
        values[name] = v
    return values
