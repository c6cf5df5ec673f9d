"""The turn queue as the service uses it: deferring a turn's job in the caller's transaction,
cancelling jobs, and turns' places in the queue. Both faces run on the same wrapper.

`QueueJobs` is the queue itself (inference.queue): a failure to defer a job reads as "the queue
is down" (QueueDown, which rolls back the turn with it; its cause kept, so a database that went
away still reads as one). `StoredJobs` stores turns and defers no job (the play page served
without workers, as its API tests run it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from db.models import GameSession, Turn
from db.turns import cancel_turn
from inference import queue


class QueueDown(RuntimeError):
    """Deferring a turn's job failed; the transaction that would have inserted the turn is rolled back."""


class Jobs(Protocol):
    async def enqueue(self, s: AsyncSession, turn: Turn, gs: GameSession) -> int | None: ...

    async def cancel_queued_turn(self, s: AsyncSession, turn: Turn, reason: str) -> Turn: ...

    async def cancel_stale_jobs(self, s: AsyncSession, session_id: int) -> int: ...

    async def position(self, s: AsyncSession, turn: Turn) -> int | None: ...

    async def positions(self, s: AsyncSession, turn_ids: Iterable[int]) -> dict[int, int]: ...


class QueueJobs:
    def __init__(self) -> None:
        self._enqueue = queue.make_enqueue()

    async def enqueue(self, s: AsyncSession, turn: Turn, gs: GameSession) -> int | None:
        try:
            return await self._enqueue(s, turn, gs)
        except Exception as e:
            raise QueueDown(str(e)) from e

    async def cancel_queued_turn(self, s: AsyncSession, turn: Turn, reason: str) -> Turn:
        return await queue.cancel_queued_turn(s, turn, reason)

    async def cancel_stale_jobs(self, s: AsyncSession, session_id: int) -> int:
        return await queue.cancel_stale_jobs(s, session_id)

    async def position(self, s: AsyncSession, turn: Turn) -> int | None:
        return await queue.queue_position(s, turn)

    async def positions(self, s: AsyncSession, turn_ids: Iterable[int]) -> dict[int, int]:
        """Positions of many waiting turns in one query (those not waiting are left out)."""
        return await queue.queue_positions(s, turn_ids)


class StoredJobs:
    async def enqueue(self, s: AsyncSession, turn: Turn, gs: GameSession) -> int | None:
        return None

    async def cancel_queued_turn(self, s: AsyncSession, turn: Turn, reason: str) -> Turn:
        return await cancel_turn(s, turn, reason)

    async def cancel_stale_jobs(self, s: AsyncSession, session_id: int) -> int:
        return 0

    async def position(self, s: AsyncSession, turn: Turn) -> int | None:
        return None

    async def positions(self, s: AsyncSession, turn_ids: Iterable[int]) -> dict[int, int]:
        return {}
