"""Migrations build the whole schema from empty, downgrade back, and agree with the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from db.engine import make_engine
from db.migrate import downgrade, head_revision, include_object, upgrade
from db.models import Base
from tests.pg import fresh_database


async def _tables(engine) -> set[str]:
    async with engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


async def test_round_trip_from_empty():
    with fresh_database("agmig") as url:
        engine = make_engine(url)
        try:
            await upgrade(engine)
            tables = await _tables(engine)
            assert set(Base.metadata.tables) <= tables
            await downgrade(engine, "base")
            assert await _tables(engine) <= {"alembic_version"}
            await upgrade(engine)
            async with engine.connect() as conn:
                rev = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            assert rev == head_revision()
        finally:
            await engine.dispose()


async def test_models_and_migrations_agree(database_url):
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:

            def diff(sync_conn):
                ctx = MigrationContext.configure(
                    sync_conn,
                    opts={
                        "compare_type": True,
                        "compare_server_default": True,
                        "include_object": include_object,
                    },
                )
                return compare_metadata(ctx, Base.metadata)

            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()
