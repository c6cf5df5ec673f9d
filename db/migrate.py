"""Apply the Alembic revisions (app schema and job-queue schema) from code."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def include_object(obj, name, type_, reflected, compare_to) -> bool:
    """Leave the job queue's tables to procrastinate's own schema files (applied by a revision)."""
    return not (type_ == "table" and name and name.startswith("procrastinate"))


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migration revisions found in {MIGRATIONS_DIR}")
    return head


async def _with_connection(engine: AsyncEngine, fn) -> None:
    async with engine.begin() as conn:
        # One advisory lock: two processes starting at once (bot and worker) do not race.
        await conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7061636)")

        def run(sync_conn):
            cfg = alembic_config()
            cfg.attributes["connection"] = sync_conn
            fn(cfg)

        await conn.run_sync(run)


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    await _with_connection(engine, lambda cfg: command.upgrade(cfg, revision))


async def downgrade(engine: AsyncEngine, revision: str = "base") -> None:
    await _with_connection(engine, lambda cfg: command.downgrade(cfg, revision))


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_revision())
