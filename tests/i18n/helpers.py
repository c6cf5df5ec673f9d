"""Writing catalogs for the tests with Babel, the way `animegamer i18n` writes them."""

from __future__ import annotations

from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from i18n import catalogs, locales


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
