"""The `animegamer bot` subcommand."""

from __future__ import annotations

import asyncio
import sys


def register(sub) -> None:
    p = sub.add_parser("bot", help="run the Discord bot")
    p.add_argument("--no-sync-commands", action="store_true",
                   help="do not register the slash commands with Discord at start (they are registered by default)")
    p.add_argument("--no-migrate", action="store_true", help="do not apply database migrations at start")
    p.set_defaults(func=run_bot_command)


def run_bot_command(args) -> int:
    from game.catalogue import load_checked_settings as load_settings

    settings = load_settings()
    if settings.discord_token is None or not settings.discord_token.get_secret_value():
        print("animegamer bot: set ANIMEGAMER_DISCORD_TOKEN to the bot's token.", file=sys.stderr)
        return 2
    return asyncio.run(_run(settings, sync=not args.no_sync_commands, migrate=not args.no_migrate))


async def _run(settings, *, sync: bool, migrate: bool) -> int:
    import discord

    from bot.client import AnimeGamerBot
    from db.runtime import open_database

    async with open_database(settings, migrate=migrate) as db:
        health = (settings.metrics_host, settings.bot_health_port) if settings.bot_health_port else None
        bot = AnimeGamerBot(settings, db, sync_commands=sync, health_address=health)
        try:
            async with bot:
                await bot.start(settings.discord_token.get_secret_value())
        except discord.LoginFailure:
            print("animegamer bot: Discord refused the token (ANIMEGAMER_DISCORD_TOKEN).", file=sys.stderr)
            return 2
    return 0
