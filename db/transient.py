"""Which database errors are transient: the one classification used by the worker, the bot and
the play page.

A transient error says the database went away for a moment (restart, failover, a connection
killed by an administrator, a full pool), not that the request was wrong: the caller retries
(worker), answers "try again" (bot: game.errors.ServiceDown; page: 503), and never records it as
the turn's failure.

Errors arrive wrapped in several layers (SQLAlchemy's DBAPIError around asyncpg's,
procrastinate's ConnectorException around psycopg's), so `classify` walks `.orig` and `__cause__`
(never `__context__`: an error raised while handling a transient one is not itself transient).

Also here: `backoff()`, the capped exponential delays with jitter every reconnect loop uses, and
`DatabaseStatus`, which a process updates so its metrics and /healthz say when it is cut off.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

# SQLSTATE -> class name. Class 08 is every "connection exception".
_SQLSTATES = {
    "57P01": "admin_shutdown",  # terminating connection due to administrator command (pg_terminate_backend, fast stop)
    "57P02": "crash_shutdown",  # another backend crashed; the server resets every connection
    "57P03": "cannot_connect_now",  # the database system is starting up / shutting down / in recovery
    "53300": "too_many_connections",
}
# The same conditions when the driver only has the server's message (a failed connection attempt
# carries no SQLSTATE in psycopg).
_MESSAGES = (
    ("the database system is starting up", "cannot_connect_now"),
    ("the database system is shutting down", "cannot_connect_now"),
    ("the database system is in recovery mode", "cannot_connect_now"),
    ("the database system is not yet accepting connections", "cannot_connect_now"),
    ("terminating connection due to administrator command", "admin_shutdown"),
    ("too many connections", "too_many_connections"),
    ("remaining connection slots are reserved", "too_many_connections"),
    ("server closed the connection unexpectedly", "connection_lost"),
    ("connection is closed", "connection_lost"),
    ("connection was closed in the middle of operation", "connection_lost"),
    ("the connection is lost", "connection_lost"),
    ("connection refused", "connection_refused"),
    ("could not connect to server", "connection_refused"),
    ("consuming input failed", "connection_lost"),
)
CLASSES = ("connection", "admin_shutdown", "crash_shutdown", "cannot_connect_now", "too_many_connections",
           "connection_lost", "connection_refused", "connection_reset", "pool_timeout", "timeout")


def _own_class(exc: BaseException) -> str | None:
    """The transient class of this exception alone (not its causes), from its SQLSTATE or type."""
    if isinstance(exc, asyncio.CancelledError):
        return None
    state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    if isinstance(state, str):
        if state in _SQLSTATES:
            return _SQLSTATES[state]
        if state.startswith("08"):
            return "connection"
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    # Pools that ran out of (healthy) connections: psycopg_pool.PoolTimeout, SQLAlchemy's TimeoutError.
    if name in ("PoolTimeout", "TooManyRequests") or (name == "TimeoutError" and module.startswith("sqlalchemy")):
        return "pool_timeout"
    if getattr(exc, "connection_invalidated", False):  # SQLAlchemy: the connection died under the statement
        return "connection_lost"
    if isinstance(exc, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError)):
        return "connection_reset"
    if isinstance(exc, BrokenPipeError):  # a subprocess that died (ffmpeg): drivers wrap their own sockets' errors
        return None
    if isinstance(exc, (ConnectionError, socket.gaierror)):
        return "connection_lost"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "timeout"
    # Drivers' own "the connection is unusable" errors, by class name (asyncpg, psycopg).
    if name in ("ConnectionDoesNotExistError", "ConnectionFailureError", "ClientConnectionError"):
        return "connection_lost"
    # asyncpg read the server's goodbye (an ErrorResponse such as 57P01, sent unasked) before it saw
    # the socket close: its protocol waits for a ReadyForQuery that never comes, and the next call
    # fails with "cannot switch to state N; another operation (2) is in progress" (asyncpg#1069;
    # SQLAlchemy 2.1.0b3 invalidates such a connection, sqlalchemy#13241). The connection is gone.
    if name == "InternalClientError" and "cannot switch to state" in str(exc):
        return "connection_lost"
    return None


def _message_class(exc: BaseException) -> str | None:
    if isinstance(exc, asyncio.CancelledError):
        return None
    message = str(exc).lower()
    for text, cls in _MESSAGES:
        if text in message:
            return cls
    return None


def _chain(exc: BaseException, depth: int = 8) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo = [exc]
    while todo and len(seen) < depth:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [getattr(e, "orig", None), e.__cause__]


def classify(exc: BaseException) -> str | None:
    """The transient class of an error (one of CLASSES), or None when it is not transient.
    SQLSTATEs and types anywhere in the chain win over messages (a wrapper repeats its cause's)."""
    chain = list(_chain(exc))
    for classifier in (_own_class, _message_class):
        for e in chain:
            cls = classifier(e)
            if cls is not None:
                return cls
    return None


def is_transient(exc: BaseException) -> bool:
    return classify(exc) is not None


def backoff(base: float = 0.5, cap: float = 10.0) -> Iterator[float]:
    """Delays for a reconnect loop: exponential from `base`, capped at `cap`, with full jitter
    (uniform in [d/2, d]) so a fleet that lost its database does not reconnect in lockstep."""
    delay = base
    while True:
        yield random.uniform(delay / 2, delay)
        delay = min(cap, delay * 2)


class DatabaseStatus:
    """Whether this process currently reaches its database. Code that talks to the database
    reports each outcome; `up` feeds /healthz and the `animegamer_database_up` gauge. A state
    change is logged once (not once per failed call)."""

    def __init__(self, name: str = "database", on_change: Callable[[bool], None] | None = None) -> None:
        self.name = name
        self.up = True
        self.since = time.monotonic()  # when `up` last changed
        self.last_error: str | None = None
        self.errors = 0
        self.on_change = on_change

    def ok(self) -> None:
        if not self.up:
            log.warning("%s reachable again after %.1f s", self.name, time.monotonic() - self.since)
            self._set(True)

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}".strip()[:300]
        if self.up:
            log.error("%s unreachable (%s: %s); retrying with backoff", self.name, classify(exc), self.last_error)
            self._set(False)

    def up_for(self) -> float:
        """Seconds since the database became reachable (0 while it is not)."""
        return time.monotonic() - self.since if self.up else 0.0

    def _set(self, up: bool) -> None:
        self.up = up
        self.since = time.monotonic()
        if self.on_change is not None:
            self.on_change(up)


async def retry_transient(fn, *, status: DatabaseStatus | None = None, what: str = "database call",
                          give_up: Callable[[], bool] = lambda: False, base: float = 0.2, cap: float = 5.0):
    """`await fn()` until it does not raise a transient error; any other error propagates. Once
    `give_up()` is true, the next transient error propagates instead of being retried."""
    delays = backoff(base, cap)
    while True:
        try:
            result = await fn()
        except Exception as e:
            if not is_transient(e) or give_up():
                raise
            if status is not None:
                status.failed(e)
            delay = next(delays)
            log.info("%s hit a transient database error (%s); retrying in %.1f s", what, classify(e), delay)
            await asyncio.sleep(delay)
            continue
        if status is not None:
            status.ok()
        return result
