"""What the bot's read commands show of a channel (/games, /status, /history, /queue and /export):
the channel's games, the live game's characters with who plays them, a game's latest turns (the
live game's, or a past one's by its number), the waiting turns with their places in the queue,
and the game to export.

Each reads in its own session, committing nothing, and copies what the bot shows out of the rows
into frozen values before the session ends, so the bot never holds a database row. A game that is
not there is refused (NoSession, UnknownGame)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from db import games, sessions, turn_reads
from db.models import GameSession
from game.errors import NothingToExport
from game.session_errors import UnknownGame
from game.states import CharacterState
from service.deps import Deps, Place
from service.refusals import live_session
from service.results import PlayerView


@dataclass(frozen=True)
class Listed:
    """One of the channel's games."""

    number: int  # 1-based, in the order the channel's games started (the one /history and /export take)
    film_id: str
    status: str  # "active", "paused" or "archived"
    created_at: datetime
    turns: int  # every turn taken (done, failed, cancelled or waiting)
    done: int  # turns with a finished shot (not taken down)


async def channel_games(deps: Deps, place: Place) -> list[Listed]:
    """The channel's games, oldest first."""
    async with deps.sessions() as s:
        return [Listed(g.number, g.session.film_id, g.session.status, g.session.created_at, g.turns, g.done)
                for g in await games.channel_games(s, place.channel_id)]


@dataclass(frozen=True)
class Standing:
    """The live game: its film, whether it is paused, its next turn's number, and each character's
    state with who plays it (in the order they joined)."""

    film_id: str
    status: str  # "active" or "paused"
    next_seq: int
    players: tuple[PlayerView, ...]
    states: dict[str, CharacterState]  # character id -> state


async def standing(deps: Deps, place: Place) -> Standing:
    """The channel's live game (NoSession if none)."""
    async with deps.sessions() as s:
        gs = await live_session(s, place.channel_id)
        return Standing(gs.film_id, gs.status, gs.next_seq,
                        tuple(PlayerView.of(p) for p in await sessions.players(s, gs.id)),
                        await sessions.states(s, gs.id))


async def _game(s: AsyncSession, place: Place, number: int | None) -> GameSession:
    """The live game (NoSession if none), or game `number` (UnknownGame if the channel has none)."""
    if number is None:
        return await live_session(s, place.channel_id)
    gs = await games.game_by_number(s, place.channel_id, number)
    if gs is None:
        raise UnknownGame(number, await games.game_count(s, place.channel_id))
    return gs


@dataclass(frozen=True)
class Line:
    """A turn as /history lists it."""

    seq: int
    author_name: str
    status: str
    instruction: str


@dataclass(frozen=True)
class History:
    film_id: str
    turns: list[Line]  # oldest first


async def history(deps: Deps, place: Place, count: int, number: int | None = None) -> History:
    """The latest `count` turns of the live game, or of game `number`."""
    async with deps.sessions() as s:
        gs = await _game(s, place, number)
        return History(gs.film_id, [Line(t.seq, t.author_name, t.status, t.instruction)
                                    for t in await turn_reads.history(s, gs.id, count)])


@dataclass(frozen=True)
class QueueLine:
    """A queued or running turn of the live game, as /queue lists it."""

    seq: int
    author_name: str
    position: int | None  # its place in the film's queue (None: no job; 0: being made)


async def waiting(deps: Deps, place: Place) -> list[QueueLine]:
    """The live game's queued and running turns (NoSession if no live game), each with its place
    in the film's queue."""
    async with deps.sessions() as s:
        gs = await live_session(s, place.channel_id)
        return [QueueLine(t.seq, t.author_name, await deps.jobs.position(s, t))
                for t in await turn_reads.pending_turns(s, gs.id)]


@dataclass(frozen=True)
class Exportable:
    """A game with a finished shot to export."""

    session_id: int
    film_id: str


async def exportable(deps: Deps, place: Place, number: int | None = None) -> Exportable:
    """The live game, or game `number`, if it has a finished shot (NothingToExport if not)."""
    async with deps.sessions() as s:
        gs = await _game(s, place, number)
        if not await turn_reads.exportable_shots(s, gs.id, 1):
            raise NothingToExport()
        return Exportable(gs.id, gs.film_id)
