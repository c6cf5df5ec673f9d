"""Queueing a turn, the one path for /act, the page's act (both through submit_turn) and a vote
round's winner (queue_turn): the game's row is locked, the refusals are checked once, under that
lock, then db.turns writes the rows and defers the job in the same transaction. Regenerating the
latest turn takes the same lock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from db import turn_reads, turns
from db.models import GameSession, Player, Turn
from db.turns import Enqueue
from game.channel_config import Limits
from game.instruction import Instruction
from game.turn_errors import BacklogFull, Cooldown, NotLatestTurn, NoTurnToRegenerate, TurnNotFinished
from service import refusals


@dataclass(frozen=True)
class Authored:
    """A direct turn as its author gave it: the name it is credited to, and its instruction."""

    author_name: str
    instruction: Instruction


# The author's turn, made from their player once the game is locked and open to them; it may be
# refused (the content rules, the quotas).
Compose = Callable[[Player], Awaitable[Authored]]


async def queue_turn(s: AsyncSession, gs: GameSession, *, author_id: int, author_name: str, instruction: Instruction,
                     limits: Limits, enqueue: Enqueue | None) -> Turn:
    """The turn, in a game the caller locked and found running (and open to the author): refused
    when the backlog is full (BacklogFull) or the author is cooling down (Cooldown; a limit of 0
    seconds: none, as for a vote round's winner, whose round paces the channel)."""
    if await turns.waiting_count(s, gs.id) >= limits.backlog_cap:
        raise BacklogFull(limits.backlog_cap)
    if limits.cooldown_seconds > 0:
        last = await turns.last_turn_at(s, author_id, gs.guild_id)
        if last is not None:
            left = limits.cooldown_seconds - (await turns.db_now(s) - last).total_seconds()
            if left > 0:
                raise Cooldown(left)
    return await turns.insert_turn(s, gs, author_id=author_id, author_name=author_name, instruction=instruction,
                                   enqueue=enqueue)


async def submit_turn(s: AsyncSession, gs: GameSession, author_id: int, compose: Compose, *, limits: Limits,
                      enqueue: Enqueue | None) -> tuple[Turn, Authored]:
    """A player's direct turn in `gs` (/act and the page's act: service.players.act): the game is
    locked, then refused when paused or ended, in vote mode or for a member who has not joined;
    `compose` makes the turn from their player, then it is queued as queue_turn queues it.
    Returns the turn and what `compose` made."""
    await turns.lock_session(s, gs)
    refusals.require_running(gs)
    made = await compose(await refusals.direct_player(s, gs, author_id))
    turn = await queue_turn(s, gs, author_id=author_id, author_name=made.author_name, instruction=made.instruction,
                            limits=limits, enqueue=enqueue)
    return turn, made


async def regenerate_latest(s: AsyncSession, gs: GameSession, enqueue: Enqueue | None, *,
                            take: Turn | None = None) -> Turn:
    """Generate the latest turn of `gs` again with a new seed (its effect on the characters undone
    first). `take`: the turn a member asked for, which must be that latest turn (NotLatestTurn).
    Refused in a paused game, with no turn to regenerate (none, or the latest taken down: a shot
    taken down stays down) and for a turn not finished yet."""
    await turns.lock_session(s, gs)
    latest = await turn_reads.latest_turn(s, gs.id)
    if take is not None and latest is not None and latest.id != take.id:
        raise NotLatestTurn(take.seq, latest.seq)
    refusals.require_running(gs)
    if latest is None or latest.removed_at is not None:
        raise NoTurnToRegenerate()
    await s.refresh(latest, with_for_update=True)
    if latest.status not in ("done", "failed"):
        raise TurnNotFinished(latest.status)
    return await turns.requeue_finished(s, gs, latest, enqueue)
