"""The turn queue as the service uses it: deferring a turn's job in the caller's transaction,
cancelling jobs, and a turn's place in the queue.

`QueueJobs` is the queue itself (inference.queue); `StoredJobs` stores turns and defers no job
(the play page served without workers, as its API tests run it). The bot gives its own (it reads
a failure to defer as "the queue is down")."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from db.models import GameSession, Turn
from db.turns import cancel_turn
from inference import queue


class Jobs(Protocol):
    async def enqueue(self, s: AsyncSession, turn: Turn, gs: GameSession) -> int | None: ...

    async def cancel_queued_turn(self, s: AsyncSession, turn: Turn, reason: str) -> Turn: ...

    async def cancel_stale_jobs(self, s: AsyncSession, session_id: int) -> int: ...

    async def position(self, s: AsyncSession, turn: Turn) -> int | None: ...


class QueueJobs:
    def __init__(self) -> None:
        self._enqueue = queue.make_enqueue()

    async def enqueue(self, s: AsyncSession, turn: Turn, gs: GameSession) -> int | None:
        return await self._enqueue(s, turn, gs)

    async def cancel_queued_turn(self, s: AsyncSession, turn: Turn, reason: str) -> Turn:
        return await queue.cancel_queued_turn(s, turn, reason)

    async def cancel_stale_jobs(self, s: AsyncSession, session_id: int) -> int:
        return await queue.cancel_stale_jobs(s, session_id)

    async def position(self, s: AsyncSession, turn: Turn) -> int | None:
        return await queue.queue_position(s, turn)


class StoredJobs:
    async def enqueue(self, s: AsyncSession, turn: Turn, gs: GameSession) -> int | None:
        return None

    async def cancel_queued_turn(self, s: AsyncSession, turn: Turn, reason: str) -> Turn:
        return await cancel_turn(s, turn, reason)

    async def cancel_stale_jobs(self, s: AsyncSession, session_id: int) -> int:
        return 0

    async def position(self, s: AsyncSession, turn: Turn) -> int | None:
        return None
