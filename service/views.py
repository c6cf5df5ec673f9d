"""What the play page reads of a channel, as frozen views rather than rows: the table (its
configuration, the live game with its players, states and waiting turns), a page of the live
game's turns, one turn by id (with its clip), and the vote mode with its latest round
(service.voting's frozen RoundView).

Each reads in its own session, committing nothing, and copies what the page renders out of the
rows before the session ends, so a face never holds a database row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from db import sessions, turn_reads, votes
from db.models import GameSession, Turn
from game.channel_config import ChannelConfig
from game.states import CharacterState
from service import voting
from service.configs import config
from service.deps import Deps, Place
from service.results import PlayerView


@dataclass(frozen=True)
class TurnView:
    """A turn as a face shows it: what was asked, how far it is, what it changed, its clip."""

    id: int
    session_id: int
    seq: int
    author_id: int
    author_name: str
    characters: tuple[str, ...]
    instruction: str
    status: str
    progress: float
    stage: str | None
    position: int | None  # its place in the film's queue (None: not waiting; 0: being made)
    error: str | None
    cancelled_by_name: str | None
    cancel_note: str | None
    backend: str | None
    is_preview: bool
    motion_level: int | None
    delta_social: int | None
    delta_entertainment: int | None
    delta_stamina: int | None
    motion_scope: float | None
    states_before: dict | None
    states_after: dict | None
    seed: int
    has_clip: bool  # finished with a clip that is still stored
    clip_pruned: bool  # finished, and its clip was pruned (retention)
    removed: bool  # taken down by a moderator (db.removal)
    timings: dict | None
    created_at: datetime | None
    finished_at: datetime | None


def turn_view(t: Turn, position: int | None = None) -> TurnView:
    done = t.status == "done"
    return TurnView(
        id=t.id, session_id=t.session_id, seq=t.seq, author_id=t.author_id, author_name=t.author_name,
        characters=tuple(t.characters), instruction=t.instruction, status=t.status, progress=t.progress,
        stage=t.progress_stage, position=position, error=t.error, cancelled_by_name=t.cancelled_by_name,
        cancel_note=t.cancel_note, backend=t.backend, is_preview=t.is_preview, motion_level=t.motion_level,
        delta_social=t.delta_social, delta_entertainment=t.delta_entertainment, delta_stamina=t.delta_stamina,
        motion_scope=t.motion_scope, states_before=t.states_before, states_after=t.states_after, seed=t.seed,
        has_clip=done and t.mp4_size is not None and t.blobs_pruned_at is None,
        clip_pruned=done and t.blobs_pruned_at is not None, removed=t.removed_at is not None,
        timings=t.timings, created_at=t.created_at, finished_at=t.finished_at,
    )


@dataclass(frozen=True)
class SessionView:
    id: int
    status: str
    film_id: str
    next_seq: int
    paused_reason: str | None  # a code (game.stored_reasons)
    paused_note: str | None  # a moderator's own words


def session_view(gs: GameSession) -> SessionView:
    return SessionView(gs.id, gs.status, gs.film_id, gs.next_seq, gs.paused_reason, gs.paused_note)


@dataclass(frozen=True)
class TableView:
    """The channel: its configuration, its live game (None: none) with its players in the order
    they joined and their characters' states, and the ids of the turns waiting or running."""

    config: ChannelConfig
    session: SessionView | None
    players: tuple[PlayerView, ...]
    states: dict[str, CharacterState]
    pending: tuple[int, ...]


async def table(deps: Deps, place: Place) -> TableView:
    async with deps.sessions() as s:
        cfg = await config(deps, s, place)
        gs = await sessions.live_session(s, place.channel_id)
        if gs is None:
            return TableView(cfg, None, (), {}, ())
        return TableView(cfg, session_view(gs), tuple(PlayerView.of(p) for p in await sessions.players(s, gs.id)),
                         await sessions.states(s, gs.id), tuple(t.id for t in await turn_reads.pending_turns(s, gs.id)))


async def _queued_place(deps: Deps, s: AsyncSession, t: Turn) -> int | None:
    """A queued turn's place in its film's queue; None for any other turn (a running one shows its
    progress instead)."""
    return await deps.jobs.position(s, t) if t.status == "queued" else None


@dataclass(frozen=True)
class TurnsView:
    session: SessionView | None  # the live game (None: none, and no turns)
    turns: tuple[TurnView, ...]  # oldest first, each with its place in the queue
    more: bool  # older turns before these


async def turns_page(deps: Deps, place: Place, *, before: int | None = None, limit: int = 20,
                     only_pending: bool = False) -> TurnsView:
    """The live game's turns not taken down, the newest `limit` (before turn number `before`), or
    only the waiting and running ones; the queued ones with their places."""
    async with deps.sessions() as s:
        gs = await sessions.live_session(s, place.channel_id)
        if gs is None:
            return TurnsView(None, (), False)
        if only_pending:
            rows, more = await turn_reads.pending_turns(s, gs.id), False
        else:
            rows, more = await turn_reads.page(s, gs.id, limit, before)
        return TurnsView(session_view(gs), tuple([turn_view(t, await _queued_place(deps, s, t)) for t in rows]), more)


@dataclass(frozen=True)
class FoundTurn:
    turn: TurnView
    film_id: str  # its game's film
    clip: bytes | None  # the stored MP4, when asked for


async def turn(deps: Deps, place: Place, turn_id: int, *, clip: bool = False) -> FoundTurn | None:
    """Turn `turn_id` if it is one of the channel's, taken down or not (the page decides what to
    show; None: no such turn here, e.g. another channel's); `clip`: with its MP4."""
    async with deps.sessions() as s:
        t = await turn_reads.get_turn(s, turn_id, blobs=clip)
        if t is None:
            return None
        gs = await sessions.session_by_id(s, t.session_id)
        if gs.channel_id != place.channel_id:
            return None
        return FoundTurn(turn_view(t, await _queued_place(deps, s, t)), gs.film_id, t.mp4 if clip else None)


@dataclass(frozen=True)
class VoteView:
    enabled: bool
    round_seconds: int
    round: voting.RoundView | None  # the open round, else the latest one (None: none yet, or no live game)
    seconds_left: float  # the open round's time left (0: none open)


async def latest_round(deps: Deps, place: Place, now: datetime, voter_id: int | None = None) -> VoteView:
    """The channel's vote mode, and its live game's latest round (the open one, else how the last
    one ended; None: none yet, or no live game) with `voter_id`'s vote, its time left counted from
    `now`."""
    async with deps.sessions() as s:
        cfg = await votes.vote_config(s, place.channel_id)
        gs = await sessions.live_session(s, place.channel_id)
        rnd = await votes.latest_round(s, gs.id) if gs is not None else None
        view = await voting.view(s, rnd.id, voter_id) if rnd is not None else None
    left = max(0.0, (view.round.deadline - now).total_seconds()) if view is not None and view.round.status == "open" else 0.0
    return VoteView(cfg.enabled, cfg.round_seconds, view, left)
