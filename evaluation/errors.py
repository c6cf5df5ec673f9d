"""Refusals of bad input: the command prints the message (it names the file and line) and exits 2."""

from __future__ import annotations


class EvalInputError(ValueError):
    """Input an evaluation cannot use; the message says which and what to do."""
