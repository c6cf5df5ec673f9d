"""Admins' actions on a server's game: the film and the playable cast. Each is audited in its
transaction (service.game.Game.record)."""

from __future__ import annotations

from db import guilds, sessions
from db.guilds import ChannelConfig
from game.catalogue import Film
from service.game import Game, Member, Place
from service.moderation import reset_session
from service.players import config


async def set_film(game: Game, place: Place, who: Member, film: str, *, channel_only: bool = False,
                   restart: bool = False) -> Film:
    """The film new games use, on the server (or only in this channel). `restart`: a game in
    progress with another film is reset into the new one, and its players leave (the cast changes)."""
    async with game.sessions.begin() as s:
        chosen = await guilds.set_film(s, place.guild_id, film, channel_id=place.channel_id if channel_only else None)
        await game.record(s, place, who, "set_film", chosen.id, scope="channel" if channel_only else "server")
        gs = await sessions.live_session(s, place.channel_id, lock=True) if restart else None
        if gs is not None and gs.film_id != chosen.id:
            fresh = (await reset_session(game, s, gs, who)).fresh
            for p in await sessions.players(s, fresh.id):
                await sessions.leave(s, fresh, p.user_id)
            fresh.film_id = chosen.id
            await s.flush()
    return chosen


async def set_character(game: Game, place: Place, who: Member, character: str,
                        enabled: bool) -> tuple[frozenset[str], ChannelConfig]:
    """Enable or disable a playable character here; returns the playable ids and the configuration
    after the change."""
    async with game.sessions.begin() as s:
        cast = await guilds.set_character_enabled(s, game.settings, place.guild_id, place.channel_id, character, enabled)
        await game.record(s, place, who, "enable_character" if enabled else "disable_character", character,
                          cast=sorted(cast))
        return cast, await config(game, s, place)
