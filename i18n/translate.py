"""Translating in the current locale (i18n.context): `_`, `ngettext`, `pgettext`, lazy `L_`.

Placeholders are the gettext way, `%(name)s`, filled after translation so that a translator can
move them; Babel's python-format checker then holds every translation to the same names. A count
passed to ngettext is available to the message as `%(n)s`, formatted for the locale (1,234 /
1.234 / 1 234).
"""

from __future__ import annotations

from typing import Any

from i18n.catalogs import translations
from i18n.context import current_locale
from i18n.formatting import number


def _fill(text: str, params: dict[str, Any]) -> str:
    if not params:
        return text
    return text % {k: str(v) if isinstance(v, Lazy) else v for k, v in params.items()}


def _(msgid: str, /, **params: Any) -> str:
    return _fill(translations(current_locale()).gettext(msgid), params)


def pgettext(context: str, msgid: str, /, **params: Any) -> str:
    return _fill(translations(current_locale()).pgettext(context, msgid), params)


def ngettext(singular: str, plural: str, n: int, /, **params: Any) -> str:
    params.setdefault("n", number(n))
    return _fill(translations(current_locale()).ngettext(singular, plural, n), params)


def N_(msgid: str, /) -> str:
    """Marks a string for extraction only; translate it where it is shown with `_(value)`."""
    return msgid


class Lazy:
    """A message rendered when it is shown, in the locale current then (module constants,
    exceptions raised in one place and shown in another)."""

    __slots__ = ("context", "msgid", "params", "plural", "n")

    def __init__(self, msgid: str, params: dict[str, Any], *, context: str | None = None,
                 plural: str | None = None, n: int | None = None):
        self.msgid, self.params, self.context, self.plural, self.n = msgid, params, context, plural, n

    def __str__(self) -> str:
        if self.plural is not None and self.n is not None:
            return ngettext(self.msgid, self.plural, self.n, **self.params)
        if self.context is not None:
            return pgettext(self.context, self.msgid, **self.params)
        return _(self.msgid, **self.params)

    def __repr__(self) -> str:
        return f"L_({self.msgid!r})"

    def __eq__(self, other: object) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))  # equal to the text it renders (__eq__), so hashed as that text

    def __add__(self, other: object) -> str:
        return str(self) + str(other)

    def __radd__(self, other: object) -> str:
        return str(other) + str(self)

    def __len__(self) -> int:
        return len(str(self))


def L_(msgid: str, /, **params: Any) -> Lazy:
    return Lazy(msgid, params)


def Lp_(context: str, msgid: str, /, **params: Any) -> Lazy:
    return Lazy(msgid, params, context=context)


def Ln_(singular: str, plural: str, n: int, /, **params: Any) -> Lazy:
    return Lazy(singular, params, plural=plural, n=n)
