"""The database a face runs on, as the face holds it: opened (the embedded Postgres under the data
directory unless DATABASE_URL is set, migrated), asked whether it answers (the health checks), and
whether an error means it is down for now. A face keeps the `Store` and hands it to the service
(the game service's sessions, the live events' LISTEN connection); it never opens a session."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.engine import libpq_url
from db.runtime import Database, open_database
from db.transient import classify
from service.deps import Deps
from service.jobs import QueueJobs, StoredJobs
from settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Store:
    """An open database: its URL (a LISTEN connection, a worker started beside the face) and what
    the service reads and writes through."""

    database: Database

    @property
    def url(self) -> str:
        return self.database.url

    @property
    def sessions(self) -> async_sessionmaker[AsyncSession]:
        return self.database.sessions

    def deps(self, settings: Settings, *, queue: bool = True, audited: bool = True) -> Deps:
        """The game service over this database. `queue`: turns are deferred to the workers' queue
        (False: stored only, no job: a face served without workers, as API tests run it)."""
        return Deps(settings, self.sessions, QueueJobs() if queue else StoredJobs(), audited=audited)


async def answers(store: Store, timeout: float) -> bool:
    """Whether the database answers within `timeout` seconds (a face's health check)."""
    return await store.database.answers(timeout)


def outage(exc: BaseException) -> str | None:
    """The kind of database outage `exc` means (db.transient's class: the database went away for a
    moment, so "try again" rather than a bug), or None when it means no outage."""
    return classify(exc)


@contextlib.asynccontextmanager
async def opened(settings: Settings, *, migrate: bool = True) -> AsyncIterator[Store]:
    """The configured database (DATABASE_URL), else the embedded Postgres under the data directory,
    migrated. On the way out the engine closes, then the embedded server is let go (`pg_ctl stop`,
    a clean shutdown, once no other process of the app holds it)."""
    if settings.database_url:
        embedded = False
        url = libpq_url(settings.database_url)
    else:
        embedded = True
        from db.embedded import release_embedded, start_embedded

        log.info("starting the embedded Postgres under %s", settings.data_dir / "pg")
        url = await asyncio.to_thread(start_embedded, settings.data_dir)
    try:
        async with open_database(settings, migrate=migrate, url=url) as db:
            yield Store(db)
    finally:
        if embedded:
            await asyncio.to_thread(release_embedded, settings.data_dir)
