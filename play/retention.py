"""The page's clips follow the same retention as Discord games: a background task runs the
clip-pruning job (service.maintenance.prune_clips) at start, then every few hours. The page never
posts its turns, so they count as posted once finished."""

from __future__ import annotations

from aiohttp import web

from play.page import PAGE, PLAY_GUILD_ID, every
from service import maintenance

PRUNE_SECONDS = 6 * 3600.0  # as the bot's prune job


async def prune(app: web.Application) -> int:
    """Prune the page's old clips once; how many turns lost theirs."""
    return await maintenance.prune_clips(app[PAGE].deps, unposted_guild_ids=[PLAY_GUILD_ID])


def add_pruner(app: web.Application) -> None:
    app.cleanup_ctx.append(every(PRUNE_SECONDS, prune, "pruning the play page's old clips failed"))
