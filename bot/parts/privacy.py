"""The bot's part in the scheduled jobs for members' data and servers it left (service.maintenance
holds the jobs; bot.parts.maintenance schedules them): carrying out /privacy delete requests, with the
edits of the member's posts in Discord, and deleting the data of servers that removed the bot
once ANIMEGAMER_GUILD_DATA_DAYS have passed, with the servers this process is in.

With the bot's shards spread over processes (bot.parts.shards), a member's deletion request is carried
out by whichever process takes it, in every server: its posts are edited through Discord's REST
API, which serves any of the bot's servers whatever shard this process runs. Servers that removed
the bot are found and deleted only by the process of their shard (bot.shards_claim): only it
knows whether the bot is still in them."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Protocol

import discord

from bot.parts import locale
from bot.parts.edits import EditScheduler
from bot.parts.hosting import DiscordClient, Stored, VoteRounds
from bot.parts.locale import Speaker
from bot.parts.removal import removed_embed
from bot.parts.service_args import deps_of
from bot.parts.shards import ShardClaim
from service import maintenance, privacy
from service.jobs import Jobs

log = logging.getLogger(__name__)


class PrivacyHost(DiscordClient, Stored, Speaker, Protocol):
    """What the privacy jobs read of the bot."""

    @property
    def shards_claim(self) -> ShardClaim: ...

    @property
    def queue(self) -> Jobs: ...

    @property
    def edits(self) -> EditScheduler: ...

    @property
    def vote_rounds(self) -> VoteRounds: ...


def removed_post(seq: int) -> dict:
    """The edit that replaces a deleted member's shot in the channel: the notice of a shot taken
    down by the system (bot.parts.removal, as the notifier shows it), no clip, no text, no button; in
    the locale current (the server's: see clear_posts)."""
    return {"content": None, "embed": removed_embed(seq, by="system"), "attachments": [], "view": None}


async def clear_posts(bot: PrivacyHost, request_id: int) -> int:
    """Edit the request's shots in Discord into a notice; how many were edited. Every server's,
    not only those of this process's shards (the request is done once, by one process): an edit
    goes through REST, which needs no gateway session of the server's shard, and a server the
    bot has left answers 403/404 (nothing left to show there). Repeated after a restart, the same
    edits are made again (harmless). Each notice is in its server's language."""
    posts = await privacy.posts_to_clear(deps_of(bot), request_id)
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
    (bot.answers.cogs.vote shows each round as it is stored now); how many."""
    if not bot.vote_rounds.loaded:
        return 0
    ids = await privacy.rounds_to_refresh(deps_of(bot), request_id)
    for round_id in ids:
        await bot.vote_rounds.refresh(round_id)
    return len(ids)


async def process_requests(bot: PrivacyHost) -> list[int]:
    """Carry out pending deletion requests (service.maintenance.deletion_requests); the ids finished.
    Before a request's last step the shots' posts are edited into a notice and the vote rounds'
    messages are shown again without the member."""

    async def before_done(request_id: int) -> None:
        await clear_posts(bot, request_id)
        await refresh_rounds(bot, request_id)

    return await maintenance.deletion_requests(deps_of(bot), before_done)


async def delete_departed(bot: PrivacyHost, *, now: datetime | None = None) -> list[int]:
    """Delete the data of servers that removed the bot more than the retention ago
    (service.maintenance.departed_servers); the servers deleted. Only the servers of this
    process's shards (bot.shards_claim): the others' are not in bot.guilds here. bot.guilds is
    complete only after READY (unavailable servers are in it too)."""
    return await maintenance.departed_servers(deps_of(bot), [g.id for g in bot.guilds], complete=bot.is_ready(),
                                              claim=bot.shards_claim, now=now)
