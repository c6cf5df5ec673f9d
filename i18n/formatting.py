"""Numbers, sizes, days, durations, relative times and lists in the current locale (CLDR data via Babel)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Literal

from babel.dates import format_date, format_timedelta
from babel.lists import format_list
from babel.numbers import format_decimal, format_percent

from i18n import locales
from i18n.context import current_locale


def _loc() -> str:
    return locales.babel_locale(current_locale())


def number(n: float, digits: int | None = None) -> str:
    """1234 -> 1,234 / 1.234 / 1 234; `digits` fixes the decimals shown."""
    fmt = None if digits is None else "#,##0" + ("." + "0" * digits if digits else "")
    return format_decimal(n, format=fmt, locale=_loc())


def day(d: date) -> str:
    """A calendar day: Dec 3, 2026 / 3 déc. 2026 / 2026/12/03."""
    return format_date(d, "medium", locale=_loc())


def percent(fraction: float) -> str:
    return format_percent(fraction, locale=_loc())


def duration(seconds: float, *, threshold: float = 0.85) -> str:
    """A length of time as people say it: "3 minutes", "3分钟"."""
    return format_timedelta(timedelta(seconds=seconds), threshold=threshold, locale=_loc())


def relative(seconds: float) -> str:
    """A moment relative to now: "in 3 minutes" (seconds > 0), "3 minutes ago" (< 0)."""
    return format_timedelta(timedelta(seconds=seconds), add_direction=True, locale=_loc())


def size(n: int) -> str:
    """A byte count as people read upload limits: 8.0 MB, 750 KB (the decimal mark per locale)."""
    if n >= 1024 * 1024:
        return f"{number(n / (1024 * 1024), 1)} MB"
    return f"{number(max(1, round(n / 1024)))} KB"


def items(values: Sequence[str], style: Literal["standard", "or"] = "standard") -> str:
    """A list as a sentence: "a, b and c" / "a、b、c"; style "or" for alternatives."""
    return format_list(list(values), style=style, locale=_loc()) if values else ""
