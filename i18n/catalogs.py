"""The compiled catalogs: each shipped .po is read with Babel and compiled in memory at first use
(no .mo files to build or to go stale); the pseudo-locale is built from the source strings."""

from __future__ import annotations

import gettext
import io
from functools import cache

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from i18n import locales


def _compile(catalog: Catalog) -> gettext.GNUTranslations:
    buf = io.BytesIO()
    write_mo(buf, catalog)  # fuzzy entries are left out: an unchecked translation shows English
    buf.seek(0)
    return gettext.GNUTranslations(buf)


def read(locale: str) -> Catalog:
    with locales.po_path(locale).open("rb") as f:
        return read_po(f, locale=locale, domain=locales.DOMAIN)


@cache
def translations(locale: str) -> gettext.NullTranslations:
    """The translations for a catalog name from locales.resolve; English returns the source text."""
    if locale == locales.PSEUDO:
        from i18n.pseudo import pseudo_catalog

        return _compile(pseudo_catalog())
    if locale == locales.SOURCE or locale not in locales.shipped():
        return gettext.NullTranslations()
    return _compile(read(locale))


def reload() -> None:
    """Forget what was read (after the .po files change, in tests and `animegamer i18n`)."""
    translations.cache_clear()
    locales.shipped.cache_clear()
