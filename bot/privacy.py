"""The bot's scheduled jobs for members' data and servers it left (run by bot.maintenance):
carrying out /privacy delete requests (db.privacy), and deleting the data of servers that
removed the bot once ANIMEGAMER_GUILD_DATA_DAYS have passed (db.departures).

With the bot's shards spread over processes (bot.shards), a member's deletion request is carried
out by whichever process takes it, in every server: its posts are edited through Discord's REST
API, which serves any of the bot's servers whatever shard this process runs. Servers that removed
the bot are found and deleted only by the process of their shard (bot.shards_claim): only it
knows whether the bot is still in them."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Protocol

import discord

from bot import locale
from bot.edits import EditScheduler
from bot.hosting import DiscordClient, StaleJobs, Stored, VoteRounds
from bot.locale import Speaker
from bot.removed import removed_embed
from bot.shards import ShardClaim
from db import departures
from db import privacy as member_data

log = logging.getLogger(__name__)


class PrivacyHost(DiscordClient, Stored, Speaker, Protocol):
    """What the privacy jobs read of the bot."""

    @property
    def shards_claim(self) -> ShardClaim: ...

    @property
    def queue(self) -> StaleJobs: ...

    @property
    def edits(self) -> EditScheduler: ...

    @property
    def vote_rounds(self) -> VoteRounds: ...


def removed_post(seq: int) -> dict:
    """The edit that replaces a deleted member's shot in the channel: the notice of a shot taken
    down by the system (bot.removed, as the notifier shows it), no clip, no text, no button; in
    the locale current (the server's: see clear_posts)."""
    return {"content": None, "embed": removed_embed(seq, by="system"), "attachments": [], "view": None}


async def clear_posts(bot: PrivacyHost, request_id: int) -> int:
    """Edit the request's shots in Discord into a notice; how many were edited. Every server's,
    not only those of this process's shards (the request is done once, by one process): an edit
    goes through REST, which needs no gateway session of the server's shard, and a server the
    bot has left answers 403/404 (nothing left to show there). Repeated after a restart, the same
    edits are made again (harmless). Each notice is in its server's language."""
    async with bot.db.sessions() as s:
        posts = await member_data.posts_to_clear(s, request_id)
    edited = 0
    for post in posts:
        try:
            async with locale.public(bot, post.guild_id, post.channel_id):
                fields = removed_post(post.seq)
            await bot.edits.final(post.channel_id, post.message_id, **fields)
            edited += 1
        except discord.HTTPException as e:  # the message, the channel or the bot's access is gone: nothing to show
            log.info("could not clear the message %s of a deleted member's turn: %s", post.message_id, e)
    return edited


async def refresh_rounds(bot: PrivacyHost, request_id: int) -> int:
    """Edit the request's vote rounds' messages, which list proposals with their authors' names
    (bot.cogs.vote shows each round as it is stored now); how many."""
    if not bot.vote_rounds.loaded:
        return 0
    async with bot.db.sessions() as s:
        ids = await member_data.rounds_to_refresh(s, request_id)
    for round_id in ids:
        await bot.vote_rounds.refresh(round_id)
    return len(ids)


async def process_requests(bot: PrivacyHost) -> list[int]:
    """Carry out pending deletion requests, each step in its own transaction; the ids finished.
    Before a request's last step the shots' posts are edited into a notice and the vote rounds'
    messages are shown again without the member. A failure leaves
    the request at its step: the next run goes on from there."""

    async def before_done(request_id: int) -> None:
        await clear_posts(bot, request_id)
        await refresh_rounds(bot, request_id)

    try:
        finished = await member_data.process_pending(bot.db.sessions, before_done=before_done)
    except Exception as e:
        log.warning("processing members' deletion requests failed (the next run goes on): %s", e)
        return []
    for request_id in finished:
        log.info("deletion request %s done", request_id)
    return finished


async def delete_departed(bot: PrivacyHost, *, now: datetime | None = None) -> list[int]:
    """Delete the data of servers that removed the bot more than the retention ago; the servers
    deleted. A server the bot is in again (added back while it was offline) is kept; one with
    data that the bot is no longer in (removed while it was offline) starts its retention now.
    Only the servers of this process's shards (bot.shards_claim): the others' are not in
    bot.guilds here, and whether the bot is still in them is for their shard's process to say;
    while that process is down, they wait for it."""
    deleted: list[int] = []
    try:
        present = [g.id for g in bot.guilds]
        async with bot.db.sessions.begin() as s:
            kept = await departures.cancel_departures(s, present)
            # Removed while the bot was offline: no GUILD_DELETE came. bot.guilds is complete only
            # after READY (unavailable servers are in it too), and only for this process's shards.
            gone = await departures.unknown_guilds(s, present, bot.shards_claim) if bot.is_ready() else []
            for guild_id in gone:
                await departures.record_departure(s, guild_id, bot.settings.guild_data_days)
        for guild_id in kept:
            log.info("server %s has the bot again: its data stays", guild_id)
        for guild_id in gone:
            log.info("server %s removed the bot while it was offline: its data is deleted in %s days", guild_id,
                     bot.settings.guild_data_days)
        async with bot.db.sessions.begin() as s:
            for guild_id in await departures.due(s, now=now, claim=bot.shards_claim):
                sessions = await departures.session_ids(s, guild_id)
                counts = await departures.delete_guild_data(s, guild_id)
                for session_id in sessions:  # their waiting jobs would only find nothing to do
                    await bot.queue.cancel_stale_jobs(s, session_id)
                log.info("server %s removed the bot: its data is deleted (%s)", guild_id, counts)
                deleted.append(guild_id)
    except Exception as e:
        log.warning("deleting the data of servers the bot left failed (the next run tries again): %s", e)
        return []
    return deleted
