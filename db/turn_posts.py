"""Posting finished turns (the bot's notifier and the play page): claims with a lease, retries
kept in order per channel, the status messages, and pruning the clips of posted turns."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from db.claims import GuildClaim, claimed_sessions, narrows
from db.dml import rowcount
from db.models import GameSession, Turn

# How long a posting claim holds. Posting is an idempotent edit of the turn's status message
# (its id is recorded before the turn runs), so a claim left by a crash or a database blip
# mid-post can expire soon: the next sweep repeats the same edit, and the status message stops
# saying "generating" within about this long.
POST_LEASE = timedelta(seconds=30)


async def claim_unposted(
    s: AsyncSession,
    claimant: str,
    lease: timedelta = timedelta(minutes=2),
    limit: int = 20,
    guild_ids: Collection[int] | None = None,
) -> list[Turn]:
    """Claim finished, unposted turns for posting (a claim expires after `lease`, so a poster
    that died mid-post does not block a turn forever). Oldest first. `guild_ids`, when given,
    limits the claim to sessions of those guilds (a poster claims only what it can post).

    A turn waiting for its next try (`post_retry_at`) is not claimed, nor is any later turn of its
    session while it waits: a channel gets its turns in order."""
    earlier = aliased(Turn)
    earlier_unposted = select(earlier.id).where(
        earlier.session_id == Turn.session_id,
        earlier.seq < Turn.seq,
        earlier.status.in_(("done", "failed")),
        earlier.posted_at.is_(None),
    )
    conditions = [
        Turn.status.in_(("done", "failed")),
        Turn.posted_at.is_(None),
        or_(Turn.post_claimed_at.is_(None), Turn.post_claimed_at < func.now() - lease),
        or_(Turn.post_retry_at.is_(None), Turn.post_retry_at <= func.now()),
        ~earlier_unposted.exists(),
    ]
    if guild_ids is not None:
        in_guilds = select(GameSession.id).where(GameSession.guild_id.in_(list(guild_ids)))
        conditions.append(Turn.session_id.in_(in_guilds.scalar_subquery()))
    sub = (
        select(Turn.id)
        .where(*conditions)
        .order_by(Turn.finished_at, Turn.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    q = (
        update(Turn)
        .where(Turn.id.in_(sub.scalar_subquery()))
        .values(post_claimed_at=func.now(), post_claimed_by=claimant[:64])
        .returning(Turn)
    )
    rows = list((await s.scalars(q)).all())
    return sorted(rows, key=lambda t: (t.session_id, t.seq))


async def mark_posted(s: AsyncSession, turn_id: int, message_id: int | None, error: str | None = None) -> None:
    """The turn is done with: in `message_id`, or (None) not in Discord, `error` saying why."""
    await s.execute(
        update(Turn)
        # Only a finished turn: one regenerated meanwhile (queued again) is posted afresh later.
        .where(Turn.id == turn_id, Turn.status.in_(("done", "failed")))
        .values(posted_message_id=message_id, posted_at=func.now(), post_retry_at=None, post_error=error and error[:2000])
    )


async def postpone_post(s: AsyncSession, turn_id: int, delay: timedelta, error: str) -> int:
    """A try failed: release the claim, count the try, and wait `delay` before the next one.
    Returns the tries so far."""
    return (
        await s.execute(
            update(Turn)
            .where(Turn.id == turn_id, Turn.posted_at.is_(None))
            .values(
                post_claimed_at=None,
                post_claimed_by=None,
                post_attempts=Turn.post_attempts + 1,
                post_retry_at=func.now() + delay,
                post_error=error[:2000],
            )
            .returning(Turn.post_attempts)
        )
    ).scalar() or 0


async def release_claim(s: AsyncSession, turn_id: int) -> None:
    await s.execute(update(Turn).where(Turn.id == turn_id, Turn.posted_at.is_(None)).values(post_claimed_at=None, post_claimed_by=None))


async def next_post_retry(s: AsyncSession, guild_ids: Collection[int]) -> datetime | None:
    """When the earliest postponed turn of these guilds may be tried again (a time to come: one
    already due was just claimed, or another poster holds it)."""
    in_guilds = select(GameSession.id).where(GameSession.guild_id.in_(list(guild_ids)))
    return await s.scalar(
        select(func.min(Turn.post_retry_at)).where(
            Turn.posted_at.is_(None), Turn.post_retry_at > func.now(), Turn.session_id.in_(in_guilds.scalar_subquery())
        )
    )


async def queued_with_status_message(s: AsyncSession, guild_ids: list[int]) -> list[tuple[Turn, int, int]]:
    """Queued turns of these guilds that have a status message, with their channel and message ids."""
    q = (
        select(Turn, GameSession.channel_id, Turn.status_message_id)
        .join(GameSession, GameSession.id == Turn.session_id)
        .where(Turn.status == "queued", Turn.status_message_id.is_not(None), GameSession.guild_id.in_(guild_ids))
        .order_by(Turn.id)
    )
    return [(t, ch, message_id) for t, ch, message_id in (await s.execute(q)).all() if message_id is not None]


async def set_status_message(s: AsyncSession, turn_id: int, message_id: int) -> str | None:
    """Record a turn's status message; returns the turn's status (None: no such turn), so that a
    turn cancelled meanwhile is seen in the same round trip."""
    q = update(Turn).where(Turn.id == turn_id).values(status_message_id=message_id).returning(Turn.status)
    return (await s.execute(q)).scalar()


async def prune_blobs(
    s: AsyncSession, older_than: timedelta, unposted_guild_ids: Collection[int] = (), claim: GuildClaim | None = None
) -> int:
    """Drop MP4s and representations of posted turns older than `older_than` (the latest turns
    of each session keep their representation: they are the next turn's context). Turns of
    `unposted_guild_ids` count as posted once finished: nobody posts them (the play page shows
    its clips from the database). `claim`: only the turns of those servers (a bot process's
    shards: bot.parts.shards.ShardClaim); None: every server's."""
    cutoff = datetime.now(UTC) - older_than
    newer = aliased(Turn)
    keep_from = select(func.max(newer.seq) - 5).where(newer.session_id == Turn.session_id).scalar_subquery()
    never_posted = select(GameSession.id).where(GameSession.guild_id.in_(list(unposted_guild_ids))).scalar_subquery()
    conditions = [
        Turn.finished_at < cutoff,
        Turn.blobs_pruned_at.is_(None),
        Turn.status.in_(("done", "failed", "cancelled")),
        or_(Turn.posted_at.is_not(None), Turn.status == "cancelled", Turn.session_id.in_(never_posted)),
        Turn.seq < keep_from,
    ]
    if claim is not None and narrows(claim):
        conditions.append(Turn.session_id.in_(claimed_sessions(claim).scalar_subquery()))
    return await rowcount(
        s,
        update(Turn)
        .where(*conditions)
        .values(mp4=None, representation=None, blobs_pruned_at=func.now()),
    )
