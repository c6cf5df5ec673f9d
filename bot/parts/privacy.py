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
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import discord

from bot.parts import locale
from bot.parts.edits import EditScheduler
from bot.parts.locale import Speaker
from bot.parts.removal import removed_embed
from bot.parts.service_args import Service
from bot.parts.shards import ShardClaim
from bot.parts.vote_rounds import VoteRounds
from service import maintenance, privacy

log = logging.getLogger(__name__)


class Guilds(Protocol):
    """The discord client, as far as the privacy jobs read it."""

    @property
    def guilds(self) -> Sequence[discord.Guild]: ...

    def is_ready(self) -> bool: ...


def removed_post(seq: int) -> dict:
    """The edit that replaces a deleted member's shot in the channel: the notice of a shot taken
    down by the system (bot.parts.removal, as the notifier shows it), no clip, no text, no button; in
    the locale current (the server's: see clear_posts)."""
    return {"content": None, "embed": removed_embed(seq, by="system"), "attachments": [], "view": None}


class PrivacyJobs:
    """The bot's part in the privacy jobs, given what they use: the discord client (its servers),
    the game service, the servers' languages, the edit scheduler, the vote part's rounds and this
    process's shards."""

    def __init__(self, client: Guilds, *, service: Service, languages: Speaker, edits: EditScheduler,
                 vote_rounds: VoteRounds, claim: ShardClaim) -> None:
        self.client, self.service, self.languages = client, service, languages
        self.edits, self.vote_rounds, self.claim = edits, vote_rounds, claim

    async def clear_posts(self, request_id: int) -> int:
        """Edit the request's shots in Discord into a notice; how many were edited. Every server's,
        not only those of this process's shards (the request is done once, by one process): an edit
        goes through REST, which needs no gateway session of the server's shard, and a server the
        bot has left answers 403/404 (nothing left to show there). Repeated after a restart, the same
        edits are made again (harmless). Each notice is in its server's language."""
        posts = await privacy.posts_to_clear(self.service(), request_id)
        edited = 0
        for post in posts:
            try:
                async with locale.public(self.languages, post.guild_id, post.channel_id):
                    fields = removed_post(post.seq)
                await self.edits.final(post.channel_id, post.message_id, **fields)
                edited += 1
            except discord.HTTPException as e:  # the message, the channel or the bot's access is gone: nothing to show
                log.info("could not clear the message %s of a deleted member's turn: %s", post.message_id, e)
        return edited

    async def refresh_rounds(self, request_id: int) -> int:
        """Edit the request's vote rounds' messages, which list proposals with their authors' names
        (bot.answers.cogs.vote shows each round as it is stored now); how many."""
        if not self.vote_rounds.loaded:
            return 0
        ids = await privacy.rounds_to_refresh(self.service(), request_id)
        for round_id in ids:
            await self.vote_rounds.refresh(round_id)
        return len(ids)

    async def process_requests(self) -> list[int]:
        """Carry out pending deletion requests (service.maintenance.deletion_requests); the ids finished.
        Before a request's last step the shots' posts are edited into a notice and the vote rounds'
        messages are shown again without the member."""

        async def before_done(request_id: int) -> None:
            await self.clear_posts(request_id)
            await self.refresh_rounds(request_id)

        return await maintenance.deletion_requests(self.service(), before_done)

    async def delete_departed(self, *, now: datetime | None = None) -> list[int]:
        """Delete the data of servers that removed the bot more than the retention ago
        (service.maintenance.departed_servers); the servers deleted. Only the servers of this
        process's shards (`claim`): the others' are not in the client's guilds here, which are
        complete only after READY (unavailable servers are in them too)."""
        return await maintenance.departed_servers(self.service(), [g.id for g in self.client.guilds],
                                                  complete=self.client.is_ready(), claim=self.claim, now=now)
