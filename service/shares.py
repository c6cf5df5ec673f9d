"""A server's share of the GPU (docs/queue.md, "Quotas and weights"): the quota checks a turn
meets before it is queued, what /admin show tells a server's admins, and the operator's own
settings per server (`animegamer shares`), each change kept with who made it.

A quota counts the turns started in the last hour (a rolling window; cancelled turns excepted):
the server's own (`turns_per_hour`) and one member's there (`member_turns_per_hour`). A server's
value overrides the operator's default (settings `server_turns_per_hour`,
`member_turns_per_hour`); 0 means no quota."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db import shares
from db.models import GuildShareChange
from db.shares import WINDOW, Share, Usage
from game.turn_errors import MemberQuota, ServerQuota
from service.deps import Deps, Member, Place
from settings import Settings

MAX_WEIGHT = 1000.0


@dataclass(frozen=True)
class Quotas:
    """The quotas in force for a server (0: none) and its weight."""

    weight: float
    server: int
    member: int


def quotas(settings: Settings, share: Share) -> Quotas:
    server = share.turns_per_hour if share.turns_per_hour is not None else settings.server_turns_per_hour
    member = share.member_turns_per_hour if share.member_turns_per_hour is not None else settings.member_turns_per_hour
    return Quotas(share.weight, server, member)


def _wait(recent: list[datetime], limit: int, now: datetime) -> float:
    """Seconds until the turns of the window fall below `limit`: when the turn that makes it
    full leaves the window."""
    leaving = recent[len(recent) - limit]
    return max(1.0, math.ceil((leaving + WINDOW - now).total_seconds()))


async def check_quota(deps: Deps, s: AsyncSession, place: Place, who: Member | None) -> None:
    """Raise MemberQuota or ServerQuota when this turn would pass one, in the caller's transaction
    (which holds the server's quota lock until it commits the turn). `who` None: the server's
    quota only (a vote round's winner, which the channel chose, not its proposer)."""
    q = quotas(deps.settings, await shares.share(s, place.guild_id))
    if not q.server and not (q.member and who is not None):
        return
    await shares.lock_quota(s, place.guild_id)
    now = await shares.now(s)
    if q.member and who is not None:
        mine = await shares.recent_turns(s, place.guild_id, who.id)
        if len(mine) >= q.member:
            raise MemberQuota(q.member, _wait(mine, q.member, now))
    if q.server:
        theirs = await shares.recent_turns(s, place.guild_id)
        if len(theirs) >= q.server:
            raise ServerQuota(q.server, _wait(theirs, q.server, now))


@dataclass(frozen=True)
class ServerShare:
    """What /admin show tells a server's admins: its weight and quotas in force, the turns of the
    last hour, and its usage of the last days."""

    quotas: Quotas
    last_hour: int
    usage: list[Usage]  # newest day first


async def server_share(deps: Deps, place: Place, days: int = 7) -> ServerShare:
    async with deps.sessions() as s:
        q = quotas(deps.settings, await shares.share(s, place.guild_id))
        return ServerShare(q, len(await shares.recent_turns(s, place.guild_id)), await shares.usage(s, place.guild_id, days))


# --- the operator's (animegamer shares)


class ShareRefused(ValueError):
    """An operator's value out of range (said to the operator's terminal, in English)."""


async def set_share(sessions: async_sessionmaker[AsyncSession], guild_id: int, actor: str, **changes: float | int | None
                    ) -> tuple[Share, Share]:
    """Change a server's `weight`, `turns_per_hour`, `member_turns_per_hour` (None: back to the
    settings' default; a field not given is kept); returns (before, after). The change is kept
    with `actor` (guild_share_changes)."""
    unknown = set(changes) - {"weight", "turns_per_hour", "member_turns_per_hour"}
    if unknown:
        raise ShareRefused(f"unknown: {', '.join(sorted(unknown))}")
    weight = changes.get("weight", 1.0)
    if weight is None or not (0 < weight <= MAX_WEIGHT and math.isfinite(weight)):
        raise ShareRefused(f"weight must be above 0 and at most {MAX_WEIGHT:g}")
    for key in ("turns_per_hour", "member_turns_per_hour"):
        v = changes.get(key)
        if v is not None and (not isinstance(v, int) or v < 0):
            raise ShareRefused(f"{key}: a number of turns, 0 or more (0: no quota)")
    async with sessions.begin() as s:
        old = await shares.share(s, guild_id)
        new = replace(old, **changes)
        await shares.set_share(s, guild_id, actor, new)
    return old, new


async def server_changes(sessions: async_sessionmaker[AsyncSession], guild_id: int, limit: int = 10
                         ) -> tuple[Share, list[GuildShareChange]]:
    async with sessions() as s:
        return await shares.share(s, guild_id), await shares.changes(s, guild_id, limit)


async def usage(sessions: async_sessionmaker[AsyncSession], days: int = 1, guild_id: int | None = None) -> list[Usage]:
    async with sessions() as s:
        return await shares.usage(s, guild_id, days)


async def shared_servers(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[int, Share]]:
    async with sessions() as s:
        return await shares.shared_servers(s)
