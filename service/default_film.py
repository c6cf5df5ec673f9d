"""A channel that has never chosen a film plays the operator's default (ANIMEGAMER_DEFAULT_FILM):
the play page's channel gets it the first time it opens, so the page always has a cast."""

from __future__ import annotations

from db import guilds, sessions
from game.catalogue import FILMS
from service.deps import Deps, Place


async def ensure_film(deps: Deps, place: Place) -> str:
    """Give the place's server the default film if it has none; the film being played: the live
    game's while it is in the catalogue, else the configured one."""
    async with deps.sessions() as s, s.begin():
        cfg = await guilds.channel_config(s, deps.settings, place.guild_id, place.channel_id)
        film_id = cfg.film.id if cfg.film else None
        if film_id is None:
            film_id = (await guilds.set_film(s, place.guild_id, deps.settings.default_film)).id
        gs = await sessions.live_session(s, place.channel_id)
        return gs.film_id if gs is not None and gs.film_id in FILMS else film_id
