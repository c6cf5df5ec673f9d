"""Throw-away databases on the test Postgres server (a real server, never a mock).

The server is `ANIMEGAMER_TEST_PG` (default: the machine's server at 127.0.0.1:5432, trust auth);
.ci/run starts it if it is down. Each test session creates its own databases and drops them.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import psycopg

ADMIN_URL = os.environ.get("ANIMEGAMER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _url_for(dbname: str) -> str:
    base, _, _ = ADMIN_URL.rpartition("/")
    return f"{base}/{dbname}"


def create_database(prefix: str = "agtest") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return _url_for(name)


def drop_database(url: str) -> None:
    name = url.rpartition("/")[2]
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def fresh_database(prefix: str = "agtest") -> Iterator[str]:
    url = create_database(prefix)
    try:
        yield url
    finally:
        drop_database(url)
