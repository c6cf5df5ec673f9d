"""Posting finished turns, as a face that posts them to chat channels does it (the Discord bot's
notifier): claim the unposted turns of its servers (a lease, so two posters never post one turn
at once), read what a post shows, and record it posted, postponed after a failed try, or given up.

What a face renders comes back as frozen values (`Post`, `Claimed`), never as rows."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from db import sessions, turn_posts, turn_reads
from db.models import GameSession, Turn
from service.deps import Deps


@dataclass(frozen=True)
class Claimed:
    """A turn claimed for posting, and its game (a game's turns are posted in order)."""

    turn_id: int
    session_id: int


@dataclass(frozen=True)
class Post:
    """A finished turn as its post shows it, and where it goes."""

    id: int
    session_id: int
    seq: int
    seed: int
    status: str  # "done" or "failed"
    instruction: str
    author_id: int
    author_name: str
    is_preview: bool
    characters: tuple[str, ...]
    motion_scope: float | None
    motion_level: int | None
    states_before: dict | None
    states_after: dict | None
    error: str | None
    mp4: bytes | None  # the clip (None: none, or pruned)
    clip_pruned: bool  # its clip was pruned (retention)
    status_message_id: int | None
    post_attempts: int
    created_at: datetime
    finished_at: datetime | None
    removed_at: datetime | None
    removed_by_id: int | None
    removed_reason: str | None
    removed_note: str | None
    guild_id: int
    channel_id: int
    film_id: str


def _post(t: Turn, gs: GameSession) -> Post:
    return Post(t.id, t.session_id, t.seq, t.seed, t.status, t.instruction, t.author_id, t.author_name, t.is_preview,
                tuple(t.characters), t.motion_scope, t.motion_level, t.states_before, t.states_after, t.error,
                t.mp4, t.blobs_pruned_at is not None, t.status_message_id, t.post_attempts, t.created_at,
                t.finished_at, t.removed_at, t.removed_by_id, t.removed_reason, t.removed_note,
                gs.guild_id, gs.channel_id, gs.film_id)


async def claim(deps: Deps, claimant: str, guild_ids: Collection[int], lease: timedelta | None = None) -> list[Claimed]:
    """Claim the finished, unposted turns of these servers for `lease` (None: the usual lease),
    oldest first; a game whose turn waits for its next try hands out none of its later ones."""
    async with deps.sessions.begin() as s:
        found = await turn_posts.claim_unposted(s, claimant, lease or turn_posts.POST_LEASE, guild_ids=list(guild_ids))
        return [Claimed(t.id, t.session_id) for t in found]


async def release(deps: Deps, turn_id: int) -> None:
    """Give a claim back untried (its post waits for something else: its status message)."""
    async with deps.sessions.begin() as s:
        await turn_posts.release_claim(s, turn_id)


async def next_retry(deps: Deps, guild_ids: Collection[int]) -> datetime | None:
    """When the earliest postponed post of these servers may be tried again (None: none waits)."""
    async with deps.sessions() as s:
        return await turn_posts.next_post_retry(s, guild_ids)


async def to_post(deps: Deps, turn_id: int) -> Post | None:
    """The claimed turn as its post shows it, with its clip; None when there is nothing to post
    any more (regenerated, or posted by someone else since the claim)."""
    async with deps.sessions() as s:
        t = await turn_reads.get_turn(s, turn_id, blobs=True)
        if t is None or t.status not in ("done", "failed") or t.posted_at is not None:
            return None
        return _post(t, await sessions.session_by_id(s, t.session_id))


async def posted(deps: Deps, turn_id: int, message_id: int | None, error: str | None = None) -> None:
    """The turn is done with: in `message_id`, or (None) not in the channel, `error` saying why."""
    async with deps.sessions.begin() as s:
        await turn_posts.mark_posted(s, turn_id, message_id, error)


async def postpone(deps: Deps, turn_id: int, delay: timedelta, error: str) -> None:
    """A try failed: the claim is released, the try counted, and the next one waits `delay`."""
    async with deps.sessions.begin() as s:
        await turn_posts.postpone_post(s, turn_id, delay, error)


@dataclass(frozen=True)
class TakenDown:
    """A turn taken down, as its removal notice says it."""

    seq: int
    author_id: int
    removed_by_id: int | None  # None: a member's data deleted at their request
    removed_reason: str | None
    removed_note: str | None


async def taken_down(deps: Deps, turn_id: int) -> TakenDown | None:
    """The turn's removal, if it was taken down (None: it was not, or it is gone): a post made
    while its turn was being taken down is edited into the notice after all."""
    async with deps.sessions() as s:
        t = await turn_reads.get_turn(s, turn_id)
    if t is None or t.removed_at is None:
        return None
    return TakenDown(t.seq, t.author_id, t.removed_by_id, t.removed_reason, t.removed_note)
