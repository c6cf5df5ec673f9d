"""Pieces the refusals and posts are worded with, rendered in the locale current where they are
shown: a placeholder rendered late (`Later`), English kept by the database shown translated
(`catalog_text`), a wait, a list, a size and a turn's status."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

from i18n import Lazy
from i18n.formatting import duration, items, size
from i18n.translate import Lp_


def size_text(n: int) -> str:
    """A byte count as people read upload limits: 8.0 MB, 750 KB (i18n.formatting.size)."""
    return size(n)


class Later:
    """A placeholder value rendered when its message is, in the locale current then:
    `L_("... %(films)s", films=Later(items, ids, "or"))`."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., object], *args: Any) -> None:
        self.fn, self.args = fn, args

    def __str__(self) -> str:
        return str(self.fn(*self.args))

    def __repr__(self) -> str:
        return f"Later({getattr(self.fn, '__name__', self.fn)!r}, {self.args!r})"


def catalog_text(text: str | Lazy) -> Lazy:
    """Text that other code passes or the database keeps in English (a pause reason such as
    "idle", a rule set's name), translated where it is shown when the catalogs have it (it is
    marked with N_ where it is written); anything else, such as a moderator's own words, is shown
    as it is."""
    return text if isinstance(text, Lazy) else Lazy(text, {})


def wait_text(seconds: float) -> str:
    """How long until a cooldown ends, in the current locale, never shorter than it is:
    "27 seconds", "3 minutes", "2 hours"."""
    secs = max(1, math.ceil(seconds))
    for unit in (3600, 60):
        if secs >= 2 * unit:
            return duration(math.ceil(secs / unit) * unit, threshold=2)
    return duration(secs, threshold=math.inf)  # under two minutes: the exact seconds


def listed(values: Sequence[object], style: Literal["standard", "or"] = "standard") -> Later:
    """Values as a list in the locale shown ("a, b, and c"; style "or": "ponyo or qiqi"), each
    value rendered then too (a name may itself be a catalog message)."""
    return Later(lambda: items([str(v) for v in values], style))


def _choices(values: Sequence[object]) -> Later:
    return listed(values, "or")


# The statuses of a turn (db.models.TURN_STATUSES) as refusals and posts name them.
TURN_STATUS = {
    "queued": Lp_("turn status", "queued"),
    "running": Lp_("turn status", "running"),
    "done": Lp_("turn status", "done"),
    "failed": Lp_("turn status", "failed"),
    "cancelled": Lp_("turn status", "cancelled"),
}


def turn_status(status: str) -> Lazy:
    """A turn's status (as stored) for display, translated where it is shown."""
    shown = TURN_STATUS.get(status)
    return shown if shown is not None else catalog_text(status)
