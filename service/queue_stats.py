"""The turn queues as a face's metrics read them: the turns waiting per film and the oldest one's
age, the whole deployment's (every worker's film queues)."""

from __future__ import annotations

from db import queue_stats
from service.deps import Deps


async def waiting_by_film(deps: Deps) -> dict[str, tuple[int, float]]:
    """{film id: (turns waiting, seconds since the oldest of them was submitted)}; films with
    nothing waiting are left out."""
    async with deps.sessions() as s:
        return await queue_stats.waiting_by_film(s)
