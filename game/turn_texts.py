"""What the worker stores about a failed turn (turns.error), as the reader sees it: one mapping for
both faces (the bot's posts and the play page).

A row is read in many languages, so the worker's fixed failure reasons are stored as codes
(`failed`, `lost`, `generator_failed:<exception kind>`) and rendered here through the catalogs
(a cancelled turn's codes: game.stored_reasons). A backend's free text is shown as written,
quoted as the generator's."""

from __future__ import annotations

from collections.abc import Callable

from i18n import _

FAILED = "failed"  # no reason given
LOST = "lost"  # its worker stopped with an error (inference.queue's sweep)
GENERATOR_FAILED = "generator_failed"  # the backend raised (inference.turn_runner): generator_failed(kind)


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
