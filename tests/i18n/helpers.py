"""Catalogs for the tests: a temporary catalog directory (`catalogs_in`), and catalogs written
with Babel, the way `animegamer i18n` writes them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from i18n import catalogs, locales


@contextmanager
def catalogs_in(root: Path) -> Iterator[Path]:
    """i18n.locales.LOCALES_DIR pointed at `root` and the compiled catalogs forgotten, for the
    block; the shipped catalogs (never written) are back afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(locales, "LOCALES_DIR", root)
        catalogs.reload()
        try:
            yield root
        finally:
            catalogs.reload()
    catalogs.reload()


def write_pot(root: Path, pot: Catalog) -> Path:
    path = root / f"{locales.DOMAIN}.pot"
    with path.open("wb") as f:
        write_po(f, pot, width=100)
    catalogs.reload()
    return path


def write_catalog(root: Path, locale: str, po: Catalog) -> Path:
    """Write a locale's .po where i18n.locales looks for it (under `root`, the patched LOCALES_DIR);
    `locale` is our catalog name (zh_TW: Babel's own name for it would be zh_Hant_TW)."""
    assert root == locales.LOCALES_DIR, "patch i18n.locales.LOCALES_DIR first (the catalog_dir fixture)"
    path = locales.po_path(locale)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, po, width=100)
    catalogs.reload()
    return path
