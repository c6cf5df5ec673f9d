"""The page's clips follow the same retention as Discord games: a background task prunes the
MP4s and representations of the page's turns older than ANIMEGAMER_BLOB_RETENTION_DAYS (at start,
then every few hours). The page never posts its turns, so they count as posted once finished
(db.turn_posts.prune_blobs' `unposted_guild_ids`)."""

from __future__ import annotations

import logging
from datetime import timedelta

from aiohttp import web

from db import turn_posts
from play.services import PLAY_GUILD_ID, SERVICES, every

log = logging.getLogger(__name__)

PRUNE_SECONDS = 6 * 3600.0  # as the bot's prune job


async def prune(app: web.Application) -> int:
    """Prune the page's old clips once; how many turns lost theirs."""
    svc = app[SERVICES]
    async with svc.db.sessions.begin() as s:
        n = await turn_posts.prune_blobs(s, timedelta(days=svc.settings.blob_retention_days), unposted_guild_ids=[PLAY_GUILD_ID])
    if n:
        log.info("pruned the clips of %d old turns of the play page", n)
    return n


def add_pruner(app: web.Application) -> None:
    app.cleanup_ctx.append(every(PRUNE_SECONDS, prune, "pruning the play page's old clips failed"))
