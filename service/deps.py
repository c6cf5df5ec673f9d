"""What every action is given: the service's dependencies (`Deps`), where it happens (`Place`)
and who asks (`Member`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db import audit
from service.jobs import Jobs
from settings import Settings


@dataclass(frozen=True)
class Place:
    """A game channel: its server and its channel."""

    guild_id: int
    channel_id: int


@dataclass(frozen=True)
class Member:
    """Who acts: an id, and the name others see (None: the name they joined the game with)."""

    id: int
    name: str | None = None


@dataclass(frozen=True)
class Deps:
    """The service's dependencies, given by the face that runs it. `audited`: admin and moderator
    actions are written to the audit log (the bot's servers; the play page has none: whoever opens
    it on this machine is its admin)."""

    settings: Settings
    sessions: async_sessionmaker[AsyncSession]
    jobs: Jobs
    audited: bool = True

    async def record(self, s: AsyncSession, place: Place, who: Member, action: str, target: str | None = None,
                     **details) -> None:
        """An admin or moderator action in the audit log, in the action's transaction."""
        if self.audited:
            await audit.record(s, guild_id=place.guild_id, channel_id=place.channel_id, actor_id=who.id,
                               actor_name=who.name or "", action=action, target=target, details=details)

    async def record_alone(self, place: Place, who: Member, action: str, target: str | None = None, **details) -> None:
        """An entry in a transaction of its own: what a refusal rolled back is still told (a text
        the content rules refused)."""
        async with self.sessions.begin() as s:
            await self.record(s, place, who, action, target, **details)
