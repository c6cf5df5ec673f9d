"""Catalogs for the tests: a temporary catalog directory (`catalogs_in`), the pseudo-locale of the
code as it is now (`current_template`, `pseudo_catalogs`), and catalogs written with Babel, the
way `animegamer i18n` writes them."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from animegamer import i18n_cli
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


def current_template() -> Catalog:
    """The template of the code as it is now (its strings and the slash commands'), built in a
    thread: template() runs the command tree in an event loop of its own."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(i18n_cli.template).result()


@contextmanager
def pseudo_catalogs(tmp_path: Path, pot: Catalog) -> Iterator[Path]:
    """The pseudo-locale built from `pot`: LOCALES_DIR pointed at a temporary directory holding
    only messages.pot, for the block; the shipped catalogs are back afterwards."""
    root = tmp_path / "i18n-locales"
    root.mkdir()
    with (root / f"{locales.DOMAIN}.pot").open("wb") as f:
        write_po(f, pot, width=100)
    with catalogs_in(root):
        yield root


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
