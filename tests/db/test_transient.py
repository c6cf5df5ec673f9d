"""db.transient: one test per class of transient database error, through every wrapper the
project meets (asyncpg, psycopg, SQLAlchemy, procrastinate), and errors that must not count."""

from __future__ import annotations

import asyncio

import asyncpg
import psycopg
import psycopg.errors
import psycopg_pool
import pytest
from procrastinate import exceptions as procrastinate_exceptions
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from db.engine import libpq_url, make_engine
from db.transient import DatabaseStatus, backoff, classify, is_transient, retry_transient
from testkit.waits import wait_for


def _wrapped_by_procrastinate(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as e:
            raise procrastinate_exceptions.ConnectorException() from e
    except procrastinate_exceptions.ConnectorException as outer:
        return outer


def _wrapped_by_sqlalchemy(cause: BaseException, invalidated: bool = False) -> BaseException:
    return sa_exc.DBAPIError("SELECT 1", None, cause, connection_invalidated=invalidated)


# --- each class, as the drivers raise it


@pytest.mark.parametrize(
    "exc, cls",
    [
        (psycopg.errors.lookup("08006")("server closed the connection"), "connection"),  # class 08
        (asyncpg.exceptions.ConnectionFailureError("connection failure"), "connection"),
        (psycopg.errors.lookup("57P01")("terminating connection due to administrator command"), "admin_shutdown"),
        (asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"), "admin_shutdown"),
        (psycopg.errors.lookup("57P02")("terminating connection because of crash of another server process"), "crash_shutdown"),
        (asyncpg.exceptions.CrashShutdownError("crash"), "crash_shutdown"),
        (psycopg.errors.lookup("57P03")("the database system is starting up"), "cannot_connect_now"),
        (asyncpg.exceptions.CannotConnectNowError("the database system is starting up"), "cannot_connect_now"),
        # psycopg's failed connection attempt has the server's message but no SQLSTATE
        (psycopg.OperationalError('connection failed: FATAL:  the database system is starting up'), "cannot_connect_now"),
        (psycopg.OperationalError('connection failed: FATAL:  the database system is shutting down'), "cannot_connect_now"),
        (psycopg.errors.lookup("53300")("sorry, too many clients already"), "too_many_connections"),
        (asyncpg.exceptions.TooManyConnectionsError("too many connections for role"), "too_many_connections"),
        (ConnectionResetError(104, "Connection reset by peer"), "connection_reset"),
        (ConnectionRefusedError(111, "Connection refused"), "connection_refused"),
        (psycopg_pool.PoolTimeout("couldn't get a connection after 10.00 sec"), "pool_timeout"),
        (sa_exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached"), "pool_timeout"),
        (asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"), "connection"),
        (asyncpg.exceptions.InterfaceError("cannot call Connection.fetch(): connection is closed"), "connection_lost"),
        # the server's goodbye read before the socket closed (test_real_terminated_connection met it in CI)
        (asyncpg.exceptions.InternalClientError("cannot switch to state 11; another operation (2) is in progress"),
         "connection_lost"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_each_transient_class(exc, cls):
    assert classify(exc) == cls
    # ... also wrapped the way SQLAlchemy and procrastinate wrap driver errors
    assert classify(_wrapped_by_sqlalchemy(exc)) == cls
    assert classify(_wrapped_by_procrastinate(exc)) == cls


def test_invalidated_connection_is_transient():
    assert classify(_wrapped_by_sqlalchemy(RuntimeError("?"), invalidated=True)) == "connection_lost"


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.errors.lookup("23505")("duplicate key value violates unique constraint"),
        asyncpg.exceptions.UniqueViolationError("duplicate key"),
        psycopg.errors.lookup("42601")("syntax error"),
        psycopg.errors.lookup("3D000")('database "x" does not exist'),  # a configuration error
        asyncpg.exceptions.InvalidCatalogNameError('database "x" does not exist'),
        asyncpg.exceptions.InvalidPasswordError("password authentication failed"),
        ValueError("bad"),
        KeyError("k"),
        FileNotFoundError(2, "No such file"),
        OSError(28, "No space left on device"),  # a full disk says nothing about the database
        BrokenPipeError(32, "Broken pipe"),  # a subprocess that died (drivers wrap their sockets' errors)
        asyncio.CancelledError(),
        asyncpg.exceptions.InternalClientError("unexpected data type of parameter"),  # a bug, not an outage
        procrastinate_exceptions.ConnectorException(),  # nothing underneath
    ],
    ids=lambda v: type(v).__name__,
)
def test_not_transient(exc):
    assert classify(exc) is None and not is_transient(exc)
    assert classify(_wrapped_by_sqlalchemy(exc)) is None


def test_an_error_raised_while_handling_a_transient_one_is_not_transient():
    try:
        try:
            raise ConnectionResetError()
        except ConnectionResetError:
            # Implicitly chained on purpose (__context__, not __cause__): what this test is about.
            raise KeyError("a bug in the handler")  # noqa: B904
    except KeyError as e:
        assert classify(e) is None


# --- real errors from real servers


async def test_real_connection_refused():
    with pytest.raises(OSError) as info:
        await asyncpg.connect("postgresql://postgres@127.0.0.1:1/postgres", timeout=5)
    assert classify(info.value) in ("connection_refused", "connection_lost")
    engine = make_engine("postgresql://postgres@127.0.0.1:1/postgres")
    try:
        with pytest.raises(Exception) as info:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        assert is_transient(info.value)
    finally:
        await engine.dispose()


async def _exited(conn, pid: int) -> None:
    """Until the terminated backend has exited (it sent its 57P01 before it went)."""

    async def gone():
        return not await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)

    await wait_for(gone, timeout=10, interval=0.02, what=f"backend {pid} exited")


async def test_real_terminated_connection(database_url):
    # 57P01, as pg_terminate_backend (and a fast shutdown) deliver it, through asyncpg, SQLAlchemy
    # and psycopg (procrastinate's driver).
    victim = await asyncpg.connect(libpq_url(database_url))
    killer = await asyncpg.connect(libpq_url(database_url))
    try:
        await killer.execute("SELECT pg_terminate_backend($1)", victim.get_server_pid())
        await _exited(killer, victim.get_server_pid())
        with pytest.raises(Exception) as info:
            await victim.fetchval("SELECT 1")
        assert is_transient(info.value), repr(info.value)
    finally:
        await killer.close()
        victim.terminate()

    engine = make_engine(database_url, pool_pre_ping=False, pool_size=1)
    try:
        async with engine.connect() as conn:
            pid = await conn.scalar(text("SELECT pg_backend_pid()"))
            other = await asyncpg.connect(libpq_url(database_url))
            await other.execute("SELECT pg_terminate_backend($1)", pid)
            await _exited(other, pid)
            await other.close()
            with pytest.raises(sa_exc.DBAPIError) as info:
                await conn.execute(text("SELECT 1"))
        assert is_transient(info.value), repr(info.value)
    finally:
        await engine.dispose()

    conn = await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True)
    other = await asyncpg.connect(libpq_url(database_url))
    await other.execute("SELECT pg_terminate_backend($1)", conn.info.backend_pid)
    await _exited(other, conn.info.backend_pid)
    await other.close()
    with pytest.raises(psycopg.Error) as info:
        await conn.execute("SELECT 1")
    await conn.close()
    assert classify(info.value) in ("admin_shutdown", "connection_lost", "connection")


# --- the helpers


def test_backoff_is_capped_and_jittered():
    delays = backoff(0.5, 4.0)
    seq = [next(delays) for _ in range(12)]
    assert all(0.25 <= d <= 4.0 for d in seq)
    assert max(seq[6:]) <= 4.0 and min(seq[6:]) >= 2.0  # capped: in [cap/2, cap]
    assert len({round(d, 6) for d in seq}) > 6  # jittered, not a fixed ladder


async def test_retry_transient_retries_only_transient_errors():
    status = DatabaseStatus("test")
    calls = []

    async def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError()
        return "ok"

    assert await retry_transient(flaky, status=status, base=0.01, cap=0.02) == "ok"
    assert len(calls) == 3 and status.up and status.errors == 2

    async def bug():
        raise ValueError("not a database problem")

    with pytest.raises(ValueError):
        await retry_transient(bug, base=0.01)

    async def down():
        raise ConnectionRefusedError()

    with pytest.raises(ConnectionRefusedError):  # give_up: the transient error propagates
        await retry_transient(down, give_up=lambda: True)
