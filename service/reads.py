"""What a channel plays, read by both faces (the bot's /help, the play page's autocomplete): its
configuration, the film (its live game's, else the configured one) and its vote mode.

It reads in its own session, committing nothing, and returns no row (a ChannelConfig, a catalogue
Film, a VoteConfig), so the faces read it as it is. The faces' other reads are
service.listings' (the bot's read commands) and service.views' (the play page)."""

from __future__ import annotations

from dataclasses import dataclass

from db import sessions, votes
from game.catalogue import FILMS, Film
from game.channel_config import ChannelConfig
from service.configs import config
from service.deps import Deps, Place


@dataclass(frozen=True)
class Playing:
    """What a channel plays: its configuration, the film (its live game's, else the configured
    one; None: none chosen) and its vote mode."""

    config: ChannelConfig
    film: Film | None
    voting: votes.VoteConfig


async def playing(deps: Deps, place: Place) -> Playing:
    async with deps.sessions() as s:
        cfg = await config(deps, s, place)
        gs = await sessions.live_session(s, place.channel_id)
        return Playing(cfg, FILMS.get(gs.film_id) if gs is not None else cfg.film,
                       await votes.vote_config(s, place.channel_id))
