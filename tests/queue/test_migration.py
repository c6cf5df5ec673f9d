"""The job-queue revision: procrastinate's schema goes in and out through Alembic."""

from __future__ import annotations

import filecmp
from pathlib import Path

import procrastinate
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from db import migrate
from db.engine import make_engine
from db.models import Base
from testkit.pg import fresh_database

VENDORED = Path(migrate.MIGRATIONS_DIR, "versions", "procrastinate-3.10.0-schema.sql")

COUNT_OBJECTS = """
SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE '%procrastinate%')
     + (SELECT count(*) FROM pg_proc WHERE proname LIKE 'procrastinate%')
     + (SELECT count(*) FROM pg_type WHERE typname LIKE 'procrastinate%')
"""


def _include(obj, name, type_, reflected, compare_to):
    return not (type_ == "table" and name and name.startswith("procrastinate"))


@pytest.fixture
async def scratch_engine():
    with fresh_database("agmig") as url:
        engine = make_engine(url)
        yield engine
        await engine.dispose()


def test_vendored_schema_is_the_installed_one():
    """A procrastinate upgrade needs a new revision: this fails until one is written."""
    shipped = Path(procrastinate.__file__).with_name("sql") / "schema.sql"
    assert procrastinate.__version__ == "3.10.0"
    assert filecmp.cmp(shipped, VENDORED, shallow=False)


async def test_upgrade_downgrade_upgrade(scratch_engine):
    await migrate.upgrade(scratch_engine)
    async with scratch_engine.connect() as conn:
        assert await conn.scalar(text(COUNT_OBJECTS)) > 40
        diff = await conn.run_sync(
            lambda c: compare_metadata(MigrationContext.configure(c, opts={"include_object": _include}), Base.metadata)
        )
        assert diff == []
        # The queue works: procrastinate's own check and its defer function.
        assert await conn.scalar(text("SELECT to_regclass('procrastinate_jobs') IS NOT NULL"))

    await migrate.downgrade(scratch_engine, "0001")
    async with scratch_engine.connect() as conn:
        assert await conn.scalar(text(COUNT_OBJECTS)) == 0
        assert await conn.scalar(text("SELECT to_regclass('turns') IS NOT NULL"))
    assert await migrate.current_revision(scratch_engine) == "0001"

    await migrate.upgrade(scratch_engine)
    assert await migrate.current_revision(scratch_engine) == migrate.head_revision()  # later revisions (0003…) come back too
