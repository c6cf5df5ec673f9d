"""What the services and the worker store about a turn in English (turns.error), as the reader
sees it: one mapping for both faces (the bot's posts and the play page).

The worker and the services write their reasons in English into the database (a row is read in
many languages); the fixed ones are known here and rendered through the catalogs, a moderator's
own words and a backend's free text are shown as written (quoted as the generator's when a turn
failed)."""

from __future__ import annotations

import re
from collections.abc import Callable

from game.errors import catalog_text
from i18n import _

# Stored failure reasons the worker writes (inference.queue.LOST_TURN, inference.worker's generic
# failure and fail_turn's default); tests/bot/test_public_locale.py holds them to inference/.
LOST_TURN = "This turn was lost: its worker stopped with an error. Try again."
_GENERIC_FAILURE = re.compile(
    r"The generator failed on this turn \((?P<kind>[\w.]+)\)\. Try again, or ask a moderator to check the worker's log\."
)


def failure_text(error: str | None, quote: Callable[[str], str] = str) -> str:
    """A failed turn's stored reason in the current language; a reason the worker does not write
    in a fixed form is quoted through `quote` (the bot escapes it for Markdown)."""
    if not error or error == "failed":
        return _("The generator gave no reason.")
    if error == LOST_TURN:
        return _("This turn was lost: its worker stopped with an error. Try again.")
    m = _GENERIC_FAILURE.fullmatch(error)
    if m is not None:
        return _("The generator failed on this turn (%(kind)s). Try again, or ask a moderator to check the worker's log.",
                 kind=m["kind"])
    # TRANSLATORS: %(reason)s is the generator's own explanation, in English
    return _("The generator reported: %(reason)s", reason=quote(error))


def reason_text(reason: str | None) -> str:
    """A stored cancel, removal or pause reason in the current language: the services' fixed
    reasons (marked N_ where written) translated, anything else as typed."""
    return str(catalog_text(reason)) if reason else ""
