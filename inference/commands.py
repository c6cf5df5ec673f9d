"""The `animegamer worker` subcommand."""

from __future__ import annotations

from animegamer.commands import not_available


def register(sub) -> None:
    sub.add_parser("worker", help="run a GPU (or preview) worker that generates turns").set_defaults(func=not_available("worker"))
