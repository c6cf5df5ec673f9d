"""Fixtures for the play page: the real aiohttp app on a free port, over the test Postgres."""

from __future__ import annotations

import contextlib

import aiohttp
import pytest_asyncio
from aiohttp import web

from db.engine import make_sessionmaker
from db.runtime import Database
from play.app import make_runner
from play.events import EventHub
from play.page import PLAY_CHANNEL_ID, Page, ensure_film
from service.runtime import Store
from tests.ports import free_port


@contextlib.asynccontextmanager
async def running_app(settings, engine, database_url, **page_of):
    """Serve the play app; yields (base URL, services)."""
    store = Store(Database(url=database_url, engine=engine, sessions=make_sessionmaker(engine)))
    hub = EventHub(database_url, PLAY_CHANNEL_ID)
    await hub.start()
    svc = Page(settings=settings, store=store, hub=hub, **{"use_queue": False, **page_of})
    await ensure_film(svc)
    runner = make_runner(svc, shutdown_timeout=2)  # as `animegamer play` serves it
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", svc
    finally:
        await runner.cleanup()
        await hub.stop()


@pytest_asyncio.fixture
async def http():
    """A client that says where it comes from, as the page's own fetches do (every POST needs a
    same-origin Origin; see play.guard): each request gets `Origin: <the URL's origin>`."""

    async def same_origin(session, ctx, params):
        params.headers.setdefault("Origin", str(params.url.origin()))

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(same_origin)
    async with aiohttp.ClientSession(trace_configs=[trace]) as s:
        yield s
