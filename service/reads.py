"""What members read of a channel's games, for both faces: the live game with its players and
their characters' states, a game's history (the live game's, or a past one's by its number), the
waiting turns with their places in the queue, the channel's games, the page's list of turns, one
turn by id (with its clip), what the channel plays (film and vote mode) and its latest vote round.

Each opens its own read-only session. What holds rows is copied into frozen values before a face
sees it (service.listings for the bot's read commands, service.views for the play page);
`playing` holds none and the faces read it as it is. A game that is not there is refused
(NoSession, UnknownGame)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from db import games, sessions, turn_reads, votes
from db.models import GameSession, Player, Turn
from game.catalogue import FILMS, Film
from game.channel_config import ChannelConfig
from game.errors import NothingToExport
from game.session_errors import UnknownGame
from game.states import CharacterState
from service import voting
from service.configs import config
from service.deps import Deps, Place
from service.refusals import live_session


@dataclass(frozen=True)
class LiveGame:
    session: GameSession
    players: list[Player]  # those playing now, in the order they joined
    states: dict[str, CharacterState]  # character id -> state


@dataclass(frozen=True)
class Table:
    """The channel as the play page shows it: its configuration, and its live game (None: none)
    with the turns still waiting or running."""

    config: ChannelConfig
    live: LiveGame | None
    pending: list[Turn]


@dataclass(frozen=True)
class Placed:
    """A turn and its place in its film's queue (None: not waiting; 0: being made)."""

    turn: Turn
    position: int | None


@dataclass(frozen=True)
class ChannelTurn:
    """One of the channel's turns (taken down or not: a face decides what to show), its game, and
    its place in the queue (None unless queued)."""

    turn: Turn
    session: GameSession
    position: int | None


@dataclass(frozen=True)
class Playing:
    """What a channel plays: its configuration, the film (its live game's, else the configured
    one; None: none chosen) and its vote mode."""

    config: ChannelConfig
    film: Film | None
    voting: votes.VoteConfig


@dataclass(frozen=True)
class TurnsPage:
    session: GameSession | None  # the live game (None: none, and no turns)
    turns: list[Placed]  # oldest first
    more: bool  # older turns before these


async def _live(s: AsyncSession, gs: GameSession) -> LiveGame:
    return LiveGame(gs, await sessions.players(s, gs.id), await sessions.states(s, gs.id))


async def live_game(deps: Deps, place: Place) -> LiveGame:
    """The channel's live game (NoSession if none) with its players and states."""
    async with deps.sessions() as s:
        return await _live(s, await live_session(s, place.channel_id))


async def table(deps: Deps, place: Place) -> Table:
    async with deps.sessions() as s:
        cfg = await config(deps, s, place)
        gs = await sessions.live_session(s, place.channel_id)
        if gs is None:
            return Table(cfg, None, [])
        return Table(cfg, await _live(s, gs), await turn_reads.pending_turns(s, gs.id))


async def _game(s: AsyncSession, place: Place, number: int | None) -> GameSession:
    if number is None:
        return await live_session(s, place.channel_id)
    gs = await games.game_by_number(s, place.channel_id, number)
    if gs is None:
        raise UnknownGame(number, await games.game_count(s, place.channel_id))
    return gs


async def history(deps: Deps, place: Place, count: int, number: int | None = None) -> tuple[GameSession, list[Turn]]:
    """The latest `count` turns of the live game, or of game `number`, oldest first."""
    async with deps.sessions() as s:
        gs = await _game(s, place, number)
        return gs, await turn_reads.history(s, gs.id, count)


async def exportable(deps: Deps, place: Place, number: int | None = None) -> GameSession:
    """The live game, or game `number`, if it has a finished shot to export (NothingToExport if not)."""
    async with deps.sessions() as s:
        gs = await _game(s, place, number)
        if not await turn_reads.exportable_shots(s, gs.id, 1):
            raise NothingToExport()
    return gs


async def waiting(deps: Deps, place: Place) -> list[Placed]:
    """The live game's queued and running turns, each with its place in the film's queue."""
    async with deps.sessions() as s:
        gs = await live_session(s, place.channel_id)
        return [Placed(t, await deps.jobs.position(s, t)) for t in await turn_reads.pending_turns(s, gs.id)]


async def channel_games(deps: Deps, place: Place) -> list[games.GameSummary]:
    """The channel's games, oldest first (their numbers), with their turn counts."""
    async with deps.sessions() as s:
        return await games.channel_games(s, place.channel_id)


async def _queued_place(deps: Deps, s: AsyncSession, t: Turn) -> int | None:
    """A queued turn's place in its film's queue; None for any other turn."""
    return await deps.jobs.position(s, t) if t.status == "queued" else None


async def _queued_places(deps: Deps, s: AsyncSession, rows: list[Turn]) -> list[Placed]:
    """Each turn with its place, counted for the queued ones only."""
    return [Placed(t, await _queued_place(deps, s, t)) for t in rows]


async def turns_page(deps: Deps, place: Place, *, before: int | None = None, limit: int = 20,
                     only_pending: bool = False) -> TurnsPage:
    """The live game's turns not taken down, the newest `limit` (before turn number `before`), or
    only the waiting and running ones; the queued ones with their places."""
    async with deps.sessions() as s:
        gs = await sessions.live_session(s, place.channel_id)
        if gs is None:
            return TurnsPage(None, [], False)
        if only_pending:
            return TurnsPage(gs, await _queued_places(deps, s, await turn_reads.pending_turns(s, gs.id)), False)
        rows, more = await turn_reads.page(s, gs.id, limit, before)
        return TurnsPage(gs, await _queued_places(deps, s, rows), more)


async def turn(deps: Deps, place: Place, turn_id: int, *, clip: bool = False) -> ChannelTurn | None:
    """Turn `turn_id` if it is one of the channel's (None: no such turn here, e.g. another
    channel's); `clip`: its stored clip and model state loaded too."""
    async with deps.sessions() as s:
        t = await turn_reads.get_turn(s, turn_id, blobs=clip)
        if t is None:
            return None
        gs = await sessions.session_by_id(s, t.session_id)
        if gs.channel_id != place.channel_id:
            return None
        return ChannelTurn(t, gs, await _queued_place(deps, s, t))


async def playing(deps: Deps, place: Place) -> Playing:
    async with deps.sessions() as s:
        cfg = await config(deps, s, place)
        gs = await sessions.live_session(s, place.channel_id)
        return Playing(cfg, FILMS.get(gs.film_id) if gs is not None else cfg.film,
                       await votes.vote_config(s, place.channel_id))


async def latest_round(deps: Deps, place: Place, voter_id: int | None = None
                       ) -> tuple[votes.VoteConfig, voting.RoundView | None]:
    """The channel's vote mode, and its live game's latest round (the open one, else how the last
    one ended; None: none yet, or no live game), with `voter_id`'s vote in it."""
    async with deps.sessions() as s:
        cfg = await votes.vote_config(s, place.channel_id)
        gs = await sessions.live_session(s, place.channel_id)
        rnd = await votes.latest_round(s, gs.id) if gs is not None else None
        return cfg, (await voting.view(s, rnd.id, voter_id) if rnd is not None else None)
