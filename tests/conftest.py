"""Shared fixtures: a real Postgres database with the schema applied, settings, sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy import text

from animegamer.quiet_start import filterwarnings_lines, quiet_start
from db.engine import make_engine, make_sessionmaker
from db.models import Base
from settings import Settings
from testkit.pg import fresh_database, migrate_to_head

# Every table of the app's models (a new one is emptied too: a listed copy once missed one).
APP_TABLES = tuple(t.name for t in Base.metadata.sorted_tables)
# procrastinate's tables (revision 0002): emptied with the app's so no job outlives its test.
QUEUE_TABLES = ("procrastinate_events", "procrastinate_periodic_defers", "procrastinate_jobs", "procrastinate_workers")


# The known harmless third-party warnings stay out of the run's output (animegamer.quiet_start):
# now, for the conftests pytest imports before it configures itself, and as filterwarnings lines
# (pytest_configure) for everything after, as pytest sets the filters anew for each phase and test.
quiet_start()


def pytest_configure(config):
    for line in filterwarnings_lines():
        config.addinivalue_line("filterwarnings", line)


def pytest_sessionstart(session):
    """Say which Postgres the tests use (shown with -q too)."""
    from testkit import pg

    line = f"postgres: {pg.describe()}"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reporter.write_line(line) if reporter else print(line)


@pytest.fixture(scope="session")
def database_url():
    """One migrated database for the whole test session (tests clean their rows)."""
    with fresh_database() as url:
        yield migrate_to_head(url)


@pytest.fixture
def embedded_data_dir():
    """A data directory for the embedded Postgres, outside pytest's tmp_path: pytest (any
    concurrent session on the machine) resets /tmp/pytest-of-<user> to mode 0700, which locks out
    the system user that pgserver runs the server as when we are root."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="animegamer-test-"))
    yield path / "data"
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        data_dir=tmp_path / "data",
        cooldown_seconds=0,
        _env_file=None,
    )


@pytest_asyncio.fixture(scope="session")
async def engine(database_url):
    eng = make_engine(database_url)
    yield eng
    await eng.dispose()


@pytest_asyncio.fixture
async def sessions(engine):
    """A session factory on a database emptied of app rows before each test."""
    async with engine.begin() as conn:
        await conn.execute(text(f"TRUNCATE {', '.join(APP_TABLES + QUEUE_TABLES)} RESTART IDENTITY CASCADE"))
    return make_sessionmaker(engine)
