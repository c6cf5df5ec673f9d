"""The `animegamer bot` subcommand."""

from __future__ import annotations

from animegamer.commands import not_available


def register(sub) -> None:
    sub.add_parser("bot", help="run the Discord bot").set_defaults(func=not_available("bot"))
