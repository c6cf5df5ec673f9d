"""Alembic environment: runs revisions on one synchronous connection handed in by db.migrate,
or (from the `alembic` command line) on a connection it opens from `sqlalchemy.url`."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.ext.asyncio import create_async_engine

from db.engine import sqlalchemy_url
from db.migrate import include_object
from db.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_object=include_object,
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return

    async def go() -> None:
        engine = create_async_engine(sqlalchemy_url(config.get_main_option("sqlalchemy.url")), poolclass=pool.NullPool)
        async with engine.connect() as conn:
            await conn.run_sync(_run)
        await engine.dispose()

    asyncio.run(go())


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_online()
