"""One-time notices to a member: a notice is told the first time it applies to them, never
again, in any server (db.notices keeps who was told what)."""

from __future__ import annotations

from db import notices
from service.deps import Deps


async def first_time(deps: Deps, user_id: int, notice: str) -> bool:
    """Record that `notice` is told to the member; True only the first time (of two concurrent
    callers, one gets True)."""
    async with deps.sessions.begin() as s:
        return await notices.first_time(s, user_id, notice)
