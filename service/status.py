"""A turn's status message, as a face that keeps one per turn in a chat channel (the Discord
bot's status board) reads and records it: where a game plays, the message recorded on its turn,
the queued turns that have one with their places in the queue, and a running turn as its
progress shows it. What comes back are frozen values, never rows."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from db import sessions, turn_posts, turn_reads
from db.models import Turn
from service.deps import Deps, Place


@dataclass(frozen=True)
class StatusTurn:
    """What a status message shows of its turn."""

    id: int
    session_id: int
    seq: int
    seed: int
    status: str
    instruction: str
    author_name: str
    status_message_id: int | None


@dataclass(frozen=True)
class QueuedStatus:
    """A queued turn with a status message, and its place in its film's queue (None: no job)."""

    turn: StatusTurn
    channel_id: int
    message_id: int
    position: int | None


def _shown(t: Turn) -> StatusTurn:
    return StatusTurn(t.id, t.session_id, t.seq, t.seed, t.status, t.instruction, t.author_name, t.status_message_id)


async def record_message(deps: Deps, turn_id: int, message_id: int) -> StatusTurn | None:
    """Record a turn's status message; the turn as it is now if it was cancelled meanwhile (its
    message is to be closed at once), else None."""
    async with deps.sessions.begin() as s:
        if await turn_posts.set_status_message(s, turn_id, message_id) != "cancelled":
            return None
        t = await turn_reads.get_turn(s, turn_id)
        return None if t is None else _shown(t)


async def waiting(deps: Deps, guild_ids: Collection[int]) -> list[QueuedStatus]:
    """The queued turns of these servers that have a status message, with their places in the
    queue: two queries, however many turns wait."""
    async with deps.sessions() as s:
        queued = await turn_posts.queued_with_status_message(s, list(guild_ids))
        positions = await deps.jobs.positions(s, [t.id for t, _, _ in queued])
        return [QueuedStatus(_shown(t), channel_id, message_id, positions.get(t.id)) for t, channel_id, message_id in queued]


async def turn(deps: Deps, turn_id: int) -> tuple[StatusTurn, Place] | None:
    """A turn as its status message shows it, and where its game plays (None: no such turn)."""
    async with deps.sessions() as s:
        t = await turn_reads.get_turn(s, turn_id)
        if t is None:
            return None
        gs = await sessions.session_by_id(s, t.session_id)
        return _shown(t), Place(gs.guild_id, gs.channel_id)
