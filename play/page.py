"""What the play page's handlers share (`Page`: its settings, database, live events and the service's
dependencies, reached from a request by `page_of`), and the one local channel.

The page is one game channel (PLAY_CHANNEL_ID) of one local guild. Each browser tab is a player,
known by a random id it keeps in sessionStorage; whoever opens the page on this machine may also
act as the guild's admin and moderator (choose the film and cast, pause, reset, cancel turns).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property

from aiohttp import web

from play.events import EventHub
from service import default_film, maintenance
from service.deps import Deps, Member, Place
from service.runtime import Store
from settings import Settings

log = logging.getLogger(__name__)

# Discord snowflakes are far above these, so the page never meets a real guild's rows.
PLAY_GUILD_ID = 1
PLAY_CHANNEL_ID = 1
PLAY_ADMIN_ID = 0  # who "created" a session from the page
PLACE = Place(PLAY_GUILD_ID, PLAY_CHANNEL_ID)
ADMIN = Member(PLAY_ADMIN_ID, "")  # whoever opened the page: its admin and moderator


@dataclass
class Page:
    settings: Settings
    store: Store  # the database, handed to the service (the page opens no session itself)
    hub: EventHub
    use_queue: bool = True  # False: turns are stored but no job is deferred (tests of the API alone)
    backend: str = "preview"
    # Told the film after an admin changes it (a model worker serves one film's queue).
    on_film: Callable[[str], Awaitable[None]] | None = None
    # The name the page was served under (--host), accepted in Host headers besides loopback.
    host: str = "127.0.0.1"

    @cached_property
    def deps(self) -> Deps:
        """The game service on the page's database (no audit log: the page has one local admin)."""
        return self.store.deps(self.settings, queue=self.use_queue, audited=False)


PAGE = web.AppKey("page", Page)


def page_of(request: web.Request) -> Page:
    return request.app[PAGE]


async def ensure_film(page: Page) -> str:
    """The page's guild gets the default film the first time, so there is always a cast; a game
    whose film left the catalogue waits, paused (the page shows why). Returns the film being
    played (the live session's, else the configured one)."""
    await maintenance.pause_withdrawn(page.deps)
    return await default_film.ensure_film(page.deps, PLACE)


def every(seconds: float, job: Callable[[web.Application], Awaitable[object]], failed: str
          ) -> Callable[[web.Application], AsyncIterator[None]]:
    """A background task for the app's lifetime (an aiohttp cleanup context): `job(app)` at once,
    then every `seconds`. A failure (the database went away) is logged after `failed`, and the
    next round tries again."""

    async def run(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                try:
                    await job(app)
                except Exception as e:
                    log.warning("%s: %s", failed, e)
                await asyncio.sleep(seconds)

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return run
