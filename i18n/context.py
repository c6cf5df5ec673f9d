"""The current locale: a context variable, so each task (an interaction, a page request, a public
post) renders in its own language. English, the source, outside any of them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from i18n import locales

_current: ContextVar[str] = ContextVar("animegamer_locale", default=locales.SOURCE)


def current_locale() -> str:
    return _current.get()


def set_locale(tag: object) -> str:
    """Make a locale current for the rest of this task (the bot's interaction checks); returns
    the catalog chosen."""
    locale = locales.resolve(tag)
    _current.set(locale)
    return locale


@contextmanager
def use_locale(tag: object) -> Iterator[str]:
    """`with use_locale(guild_language): ...` renders everything inside in that locale."""
    token = _current.set(locales.resolve(tag))
    try:
        yield _current.get()
    finally:
        _current.reset(token)
