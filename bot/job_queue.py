"""The bot's view of the turn queue (inference.queue), as its parts and the game service use it."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from db.models import GameSession, Turn


class QueueDown(RuntimeError):
    """Deferring a turn's job failed; the transaction that would have inserted the turn is rolled back."""


class JobQueue:
    """The bot's view of the turn queue (inference.queue): deferring a turn's job in the caller's
    transaction, cancelling jobs, and queue positions. A failure to defer reads as "the queue is
    down" and rolls back the turn with it."""

    def __init__(self) -> None:
        from inference import queue

        self._q = queue
        self._enqueue = queue.make_enqueue()

    async def enqueue(self, s: AsyncSession, turn: Turn, gs: GameSession) -> int | None:
        try:
            return await self._enqueue(s, turn, gs)
        except Exception as e:
            raise QueueDown(str(e)) from e

    async def cancel_queued_turn(self, s: AsyncSession, turn: Turn, reason: str) -> Turn:
        return await self._q.cancel_queued_turn(s, turn, reason)

    async def cancel_stale_jobs(self, s: AsyncSession, session_id: int) -> int:
        return await self._q.cancel_stale_jobs(s, session_id)

    async def position(self, s: AsyncSession, turn: Turn) -> int | None:
        return await self._q.queue_position(s, turn)

    async def positions(self, s: AsyncSession, turn_ids) -> dict[int, int]:
        """Positions of many waiting turns in one query (those not waiting are left out)."""
        return await self._q.queue_positions(s, turn_ids)
