"""What the play page reads of a channel, as frozen views rather than rows: the table (its
configuration, the live game with its players, states and waiting turns), a page of turns, one
turn, and the vote mode with its latest round (service.voting's frozen RoundView).

Each reads through service.reads (the one place these reads are written) and copies what a face
renders out of the rows it returns (loaded there), so a face never holds a database row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from db.models import GameSession, Turn
from game.channel_config import ChannelConfig
from game.states import CharacterState
from service import reads, voting
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
    t = await reads.table(deps, place)
    if t.live is None:
        return TableView(t.config, None, (), {}, ())
    return TableView(t.config, session_view(t.live.session), tuple(PlayerView.of(p) for p in t.live.players),
                     dict(t.live.states), tuple(p.id for p in t.pending))


@dataclass(frozen=True)
class TurnsView:
    session: SessionView | None  # the live game (None: none, and no turns)
    turns: tuple[TurnView, ...]  # oldest first, each with its place in the queue
    more: bool  # older turns before these


async def turns_page(deps: Deps, place: Place, *, before: int | None = None, limit: int = 20,
                     only_pending: bool = False) -> TurnsView:
    """service.reads.turns_page as views."""
    page = await reads.turns_page(deps, place, before=before, limit=limit, only_pending=only_pending)
    if page.session is None:
        return TurnsView(None, (), False)
    return TurnsView(session_view(page.session), tuple(turn_view(p.turn, p.position) for p in page.turns), page.more)


@dataclass(frozen=True)
class FoundTurn:
    turn: TurnView
    film_id: str  # its game's film
    clip: bytes | None  # the stored MP4, when asked for


async def turn(deps: Deps, place: Place, turn_id: int, *, clip: bool = False) -> FoundTurn | None:
    """Turn `turn_id` if it is one of the channel's (None: not here); `clip`: with its MP4."""
    found = await reads.turn(deps, place, turn_id, clip=clip)
    if found is None:
        return None
    return FoundTurn(turn_view(found.turn, found.position), found.session.film_id, found.turn.mp4 if clip else None)


@dataclass(frozen=True)
class VoteView:
    enabled: bool
    round_seconds: int
    round: voting.RoundView | None  # the open round, else the latest one (None: none yet, or no live game)
    seconds_left: float  # the open round's time left (0: none open)


async def latest_round(deps: Deps, place: Place, now: datetime, voter_id: int | None = None) -> VoteView:
    """The channel's vote mode and its latest round (service.reads.latest_round), with
    `voter_id`'s vote, its time left counted from `now`."""
    cfg, view = await reads.latest_round(deps, place, voter_id)
    left = max(0.0, (view.round.deadline - now).total_seconds()) if view is not None and view.round.status == "open" else 0.0
    return VoteView(cfg.enabled, cfg.round_seconds, view, left)
