"""What a face's read commands show of a channel (the bot's /games, /status, /history, /queue and
/export), as frozen values copied out of service.reads' rows: the channel's games, the live game's
characters with who plays them, a game's latest turns, the waiting turns with their places in the
queue, and the game to export."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from game.states import CharacterState
from service import reads
from service.deps import Deps, Place
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
    return [Listed(g.number, g.session.film_id, g.session.status, g.session.created_at, g.turns, g.done)
            for g in await reads.channel_games(deps, place)]


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
    live = await reads.live_game(deps, place)
    gs = live.session
    return Standing(gs.film_id, gs.status, gs.next_seq, tuple(PlayerView.of(p) for p in live.players),
                    live.states)


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
    gs, turns = await reads.history(deps, place, count, number)
    return History(gs.film_id, [Line(t.seq, t.author_name, t.status, t.instruction) for t in turns])


@dataclass(frozen=True)
class QueueLine:
    """A queued or running turn of the live game, as /queue lists it."""

    seq: int
    author_name: str
    position: int | None  # its place in the film's queue (None: no job; 0: being made)


async def waiting(deps: Deps, place: Place) -> list[QueueLine]:
    """The live game's queued and running turns (NoSession if no live game)."""
    return [QueueLine(w.turn.seq, w.turn.author_name, w.position) for w in await reads.waiting(deps, place)]


@dataclass(frozen=True)
class Exportable:
    """A game with a finished shot to export."""

    session_id: int
    film_id: str


async def exportable(deps: Deps, place: Place, number: int | None = None) -> Exportable:
    """The live game, or game `number`, if it has a finished shot (NothingToExport if not)."""
    gs = await reads.exportable(deps, place, number)
    return Exportable(gs.id, gs.film_id)
