"""The `animegamer play` subcommand."""

from __future__ import annotations

from animegamer.commands import not_available


def register(sub) -> None:
    sub.add_parser("play", help="play in a local web page: no Discord, no GPU, no database server needed").set_defaults(func=not_available("play"))
