"""The scheduled jobs, written once for both faces: pausing idle games and games whose film was
withdrawn from the catalogue, pruning old clips, carrying out members' deletion requests, and
deleting the data of servers that removed the bot. A face only schedules them (the bot's
APScheduler: bot.parts.maintenance; the play page's background loops) and says what only it can: a
pause's notice in its channel, the servers it is in, the posts to edit before a member's data goes.

Each job catches a failure (the database went away), logs it and reports nothing done: the next
run tries again. `claim`: a bot process running some of the shards touches only their servers'
rows (bot.parts.shards.ShardClaim; None: every server's, as the play page and an unsharded bot)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from db import departures, turn_posts
from db import privacy as member_data
from db import sessions as game_sessions
from db.claims import GuildClaim
from db.models import GameSession
from game import stored_reasons
from game.catalogue import FILMS
from service.deps import Deps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToPause:
    """A game a job is about to pause, as its notice needs it."""

    id: int
    guild_id: int
    channel_id: int
    film_id: str


# Tells a game's channel why it is paused, before the pause is committed; False: the notice failed
# for now (the game stays active and is told at the next run). None: nobody to tell (the page shows why).
Tell = Callable[[ToPause], Awaitable[bool]]
Candidates = Callable[[AsyncSession], Awaitable[Sequence[GameSession]]]


async def _pause(deps: Deps, what: str, candidates: Candidates, reason: str, tell: Tell | None) -> list[int]:
    """Pause the candidate games, each told first, in one transaction: a crash before the commit
    pauses none, and the next run tells them again (at least once, never silently)."""
    paused: list[int] = []
    try:
        async with deps.sessions.begin() as s:
            for gs in await candidates(s):
                if tell is not None and not await tell(ToPause(gs.id, gs.guild_id, gs.channel_id, gs.film_id)):
                    continue
                await game_sessions.set_paused(s, gs, True, reason)
                log.info("session %s (channel %s) paused: %s", gs.id, gs.channel_id, reason)
                paused.append(gs.id)
    except Exception as e:  # the database is down: the next run tries again
        log.warning("pausing %s sessions failed: %s", what, e)
        return []
    return paused


async def pause_idle(deps: Deps, *, claim: GuildClaim | None = None, tell: Tell | None = None) -> list[int]:
    """Pause the games with no turn for ANIMEGAMER_IDLE_PAUSE_MINUTES; the ids paused."""
    idle = timedelta(minutes=deps.settings.idle_pause_minutes)
    return await _pause(deps, "idle", lambda s: game_sessions.idle_sessions(s, idle, claim), stored_reasons.IDLE, tell)


async def pause_withdrawn(deps: Deps, *, claim: GuildClaim | None = None, tell: Tell | None = None) -> list[int]:
    """Pause the games whose film left the catalogue (an operator removed or disabled it); the ids
    paused. Their states, players and queued turns are kept: once the film is back a moderator
    resumes them and the queued turns run."""
    return await _pause(deps, "withdrawn-film", lambda s: game_sessions.withdrawn_sessions(s, set(FILMS), claim),
                        stored_reasons.FILM_WITHDRAWN, tell)


async def prune_clips(deps: Deps, *, claim: GuildClaim | None = None, unposted_guild_ids: Collection[int] = ()) -> int:
    """Drop the clips and representations of turns older than ANIMEGAMER_BLOB_RETENTION_DAYS;
    how many turns lost theirs. `unposted_guild_ids`: servers whose turns nobody posts (the play
    page's), which count as posted once finished (db.turn_posts.prune_blobs)."""
    try:
        async with deps.sessions.begin() as s:
            n = await turn_posts.prune_blobs(s, timedelta(days=deps.settings.blob_retention_days),
                                             unposted_guild_ids=unposted_guild_ids, claim=claim)
    except Exception as e:
        log.warning("pruning old clips failed: %s", e)
        return 0
    if n:
        log.info("pruned the clips of %d old turns", n)
    return n


async def deletion_requests(deps: Deps, before_done: Callable[[int], Awaitable[object]] | None = None) -> list[int]:
    """Carry out members' pending deletion requests (db.privacy), each step in its own transaction;
    the ids finished. `before_done(request_id)` runs before a request's last step (the bot edits
    the member's posts). A failure leaves the request at its step: the next run goes on from there."""
    try:
        finished = await member_data.process_pending(deps.sessions, before_done=before_done)
    except Exception as e:
        log.warning("processing members' deletion requests failed (the next run goes on): %s", e)
        return []
    for request_id in finished:
        log.info("deletion request %s done", request_id)
    return finished


@dataclass(frozen=True)
class Departure:
    left_at: datetime
    delete_after: datetime  # when the server's data is deleted unless the bot is added back


async def left_server(deps: Deps, guild_id: int) -> Departure:
    """The bot was removed from server `guild_id`: its data is deleted after ANIMEGAMER_GUILD_DATA_DAYS
    unless the bot is added back. Leaving again keeps the first date."""
    async with deps.sessions.begin() as s:
        row = await departures.record_departure(s, guild_id, deps.settings.guild_data_days)
        return Departure(row.left_at, row.delete_after)


async def back_in_server(deps: Deps, guild_id: int) -> bool:
    """The bot was added to server `guild_id`: a pending deletion of its data is cancelled (True)."""
    async with deps.sessions.begin() as s:
        return bool(await departures.cancel_departures(s, [guild_id]))


async def departed_servers(deps: Deps, present: Collection[int], *, complete: bool, claim: GuildClaim | None = None,
                           now: datetime | None = None) -> list[int]:
    """Delete the data of servers that removed the bot more than ANIMEGAMER_GUILD_DATA_DAYS ago; the
    servers deleted. `present`: the servers the bot is in (of `claim`'s shards); one of them is
    kept (added back while the bot was offline). `complete`: `present` lists them all (after
    READY), so a server with data that is not in it removed the bot while it was offline, and its
    retention starts now. Only `claim`'s servers: whether the bot is still in the others is for
    their shard's process to say; while that process is down, they wait for it."""
    days = deps.settings.guild_data_days
    deleted: list[int] = []
    try:
        async with deps.sessions.begin() as s:
            kept = await departures.cancel_departures(s, present)
            # No GUILD_DELETE came for a server that removed the bot while it was offline.
            gone = await departures.unknown_guilds(s, present, claim) if complete else []
            for guild_id in gone:
                await departures.record_departure(s, guild_id, days)
        for guild_id in kept:
            log.info("server %s has the bot again: its data stays", guild_id)
        for guild_id in gone:
            log.info("server %s removed the bot while it was offline: its data is deleted in %s days", guild_id, days)
        async with deps.sessions.begin() as s:
            for guild_id in await departures.due(s, now=now, claim=claim):
                session_ids = await departures.session_ids(s, guild_id)
                counts = await departures.delete_guild_data(s, guild_id)
                for session_id in session_ids:  # their waiting jobs would only find nothing to do
                    await deps.jobs.cancel_stale_jobs(s, session_id)
                log.info("server %s removed the bot: its data is deleted (%s)", guild_id, counts)
                deleted.append(guild_id)
    except Exception as e:
        log.warning("deleting the data of servers the bot left failed (the next run tries again): %s", e)
        return []
    return deleted
