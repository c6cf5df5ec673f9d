"""Fixtures of the i18n tests: catalogs in a temporary directory (the shipped i18n/locales is never
written), and the end-to-end fixtures of tests/bot (the real bot on the fake Discord, a preview
worker) for the pseudo-locale scenario."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bot.conftest import bot_db, start_bot, world  # noqa: F401  (fixtures shared with the bot tests)
from tests.i18n.helpers import catalogs_in
from tests.queue.conftest import qsettings, start_worker  # noqa: F401


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Iterator[Path]:
    """i18n.locales.LOCALES_DIR pointed at an empty temporary directory, the compiled catalogs
    forgotten before and after: the shipped catalogs are back when the test ends."""
    root = tmp_path / "locales"
    root.mkdir()
    with catalogs_in(root):
        yield root
