"""Helpers for registering subcommands."""

from __future__ import annotations

import sys

NOT_AVAILABLE = 2


def not_available(name: str):
    """A subcommand whose part is not built yet: it says so and exits 2 (it never pretends)."""

    def run(args) -> int:
        print(f"animegamer {name}: not available yet in this version.", file=sys.stderr)
        return NOT_AVAILABLE

    return run
