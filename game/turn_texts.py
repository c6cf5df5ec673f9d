"""What the services and the worker store about a turn (turns.error), as the reader sees it: one
mapping for both faces (the bot's posts and the play page).

A row is read in many languages, so the worker's fixed failure reasons are stored as codes
(`failed`, `lost`, `generator_failed:<exception kind>`) and rendered here through the catalogs;
the services' fixed cancel and pause reasons are their English source texts (marked N_ where
written), translated when shown. A moderator's own words and a backend's free text are shown as
written (quoted as the generator's when a turn failed)."""

from __future__ import annotations

from collections.abc import Callable

from game.errors import catalog_text
from i18n import _

FAILED = "failed"  # no reason given
LOST = "lost"  # its worker stopped with an error (inference.queue's sweep)
GENERATOR_FAILED = "generator_failed"  # the backend raised (inference.worker): generator_failed(kind)


def generator_failed(kind: str) -> str:
    """The stored reason of a turn whose backend raised an exception of class `kind`."""
    return f"{GENERATOR_FAILED}:{kind}"


def failure_text(error: str | None, quote: Callable[[str], str] = str) -> str:
    """A failed turn's stored reason in the current language; a reason the worker does not write
    in a fixed form is quoted through `quote` (the bot escapes it for Markdown)."""
    if not error or error == FAILED:
        return _("The generator gave no reason.")
    if error == LOST:
        return _("This turn was lost: its worker stopped with an error. Try again.")
    code, _sep, kind = error.partition(":")
    if code == GENERATOR_FAILED and kind:
        return _("The generator failed on this turn (%(kind)s). Try again, or ask a moderator to check the worker's log.",
                 kind=quote(kind))
    # TRANSLATORS: %(reason)s is the generator's own explanation, in English
    return _("The generator reported: %(reason)s", reason=quote(error))


def reason_text(reason: str | None) -> str:
    """A stored cancel, removal or pause reason in the current language: the services' fixed
    reasons (marked N_ where written) translated, anything else as typed."""
    return str(catalog_text(reason)) if reason else ""
