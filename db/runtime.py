"""Opening the database for a process: resolve the URL (embedded or configured), build the engine,
optionally apply migrations. Shared by every subcommand so each opens it the same way."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from settings import Settings
from db.engine import make_engine, make_sessionmaker, resolve_database_url


@dataclass
class Database:
    url: str  # postgresql:// form
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]


@contextlib.asynccontextmanager
async def open_database(settings: Settings, *, migrate: bool = False, url: str | None = None) -> AsyncIterator[Database]:
    url = url or resolve_database_url(settings)
    engine = make_engine(url)
    try:
        if migrate:
            from db.migrate import upgrade

            await upgrade(engine)
        yield Database(url=url, engine=engine, sessions=make_sessionmaker(engine))
    finally:
        await engine.dispose()
