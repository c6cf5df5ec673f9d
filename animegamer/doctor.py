"""The `animegamer doctor` subcommand."""

from __future__ import annotations

from animegamer.commands import not_available


def register(sub) -> None:
    sub.add_parser("doctor", help="check settings, database, ffmpeg, models and GPU").set_defaults(func=not_available("doctor"))
