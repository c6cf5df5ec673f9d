"""Opening the database for a process: resolve the URL (embedded or configured), build the engine,
optionally apply migrations. Shared by every subcommand so each opens it the same way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from db.engine import make_engine, make_sessionmaker, resolve_database_url
from settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Database:
    url: str  # postgresql:// form
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]

    async def ping(self) -> None:
        """SELECT 1 on a fresh checkout: raises what the database (or the way to it) answers."""
        async with self.engine.connect() as conn:
            await conn.exec_driver_sql("SELECT 1")

    async def answers(self, timeout: float) -> bool:
        """Whether the database answers SELECT 1 within `timeout` seconds (the health checks):
        any failure to answer in time counts as not answering, and is logged."""
        try:
            async with asyncio.timeout(timeout):
                await self.ping()
            return True
        except Exception as e:
            log.info("health check: the database does not answer (%s)", e)
            return False


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
