"""The `animegamer bot` subcommand."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys


def _shard_ids(text: str) -> list[int]:
    from settings import parse_shard_ids

    try:
        return parse_shard_ids(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _shard_count(text: str) -> int:
    if not text.strip().isdecimal() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shard count: a whole number, 1 or more")
    return int(text)


def register(sub) -> None:
    p = sub.add_parser("bot", help="run the Discord bot")
    p.add_argument("--no-sync-commands", action="store_true",
                   help="do not register the slash commands with Discord at start (by default the process holding shard 0 registers them)")
    p.add_argument("--no-migrate", action="store_true", help="do not apply database migrations at start")
    p.add_argument("--shards", type=_shard_ids, metavar="IDS",
                   help="run only these gateway shards, e.g. 0-3 or 0,2,5 (needs --shard-count or ANIMEGAMER_SHARD_COUNT); "
                        "this process then handles only their servers. Default: ANIMEGAMER_SHARD_IDS, else every shard")
    p.add_argument("--shard-count", type=_shard_count, metavar="N",
                   help="the bot's total number of shards across all its processes. "
                        "Default: ANIMEGAMER_SHARD_COUNT, else Discord's recommendation")
    p.set_defaults(func=run_bot_command)


def run_bot_command(args) -> int:
    from game.catalogue import load_checked_settings as load_settings
    from settings import SettingsError, check_shards

    shards, count = getattr(args, "shards", None), getattr(args, "shard_count", None)
    if shards is not None and count is not None:
        try:
            check_shards(shards, count)
        except ValueError as e:
            print(f"animegamer bot: --shards/--shard-count: {e}", file=sys.stderr)
            return 2
    overrides = {k: v for k, v in (("shard_ids", shards), ("shard_count", count)) if v is not None}
    try:
        settings = load_settings(**overrides)
    except SettingsError as e:
        if not overrides:
            raise
        print(f"animegamer bot: {e}\n  (--shards sets ANIMEGAMER_SHARD_IDS, --shard-count sets "
              "ANIMEGAMER_SHARD_COUNT)", file=sys.stderr)
        return 2
    if settings.discord_token is None or not settings.discord_token.get_secret_value():
        print("animegamer bot: set ANIMEGAMER_DISCORD_TOKEN to the bot's token.", file=sys.stderr)
        return 2
    return asyncio.run(_run(settings, sync=not args.no_sync_commands, migrate=not args.no_migrate))


async def _run(settings, *, sync: bool, migrate: bool) -> int:
    import discord

    from bot.client import AnimeGamerBot
    from service.runtime import opened

    async with opened(settings, migrate=migrate) as db:
        health = (settings.metrics_host, settings.bot_health_port) if settings.bot_health_port else None
        bot = AnimeGamerBot(settings, db, sync_commands=sync, health_address=health)
        logging.getLogger(__name__).info("gateway: %s", bot.shards_claim)
        try:
            async with bot:
                await bot.start(settings.discord_token.get_secret_value())
        except discord.LoginFailure:
            print("animegamer bot: Discord refused the token (ANIMEGAMER_DISCORD_TOKEN).", file=sys.stderr)
            return 2
        except discord.ConnectionClosed as e:
            if e.code != 4010:
                raise
            print(f"animegamer bot: Discord refused the shards ({bot.shards_claim}): invalid shard (4010).",
                  file=sys.stderr)
            return 2
    return 0
