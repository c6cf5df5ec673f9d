"""Database URLs, the async engine and the session factory."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from settings import Settings

_SCHEMES = ("postgresql", "postgres", "postgresql+asyncpg", "postgresql+psycopg")


def _with_scheme(url: str, scheme: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in _SCHEMES:
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return urlunsplit((scheme, *parts[1:]))


def libpq_url(url: str) -> str:
    """postgresql:// form, for psql, psycopg (the job queue) and asyncpg's LISTEN connection."""
    return _with_scheme(url, "postgresql")


def sqlalchemy_url(url: str) -> str:
    return _with_scheme(url, "postgresql+asyncpg")


def resolve_database_url(settings: Settings) -> str:
    """The configured server, or the embedded one started under the data directory."""
    if settings.database_url:
        return libpq_url(settings.database_url)
    from db.embedded import start_embedded

    return start_embedded(settings.data_dir)


def make_engine(url: str, **kw) -> AsyncEngine:
    kw.setdefault("pool_pre_ping", True)
    kw.setdefault("pool_size", 5)
    return create_async_engine(sqlalchemy_url(url), **kw)


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


def masked_url(url: str) -> str:
    """The URL for messages: its password (also a `password=` query parameter) shown as ***, the
    rest readable (a socket directory in `host=` not percent-encoded)."""
    u = make_url(url)
    if "password" in u.query:
        u = u.update_query_dict({"password": "***"})
    return unquote(u.render_as_string(hide_password=True))


def _endpoints(u: URL) -> list[tuple[str, int]]:
    """(host or socket directory, port) pairs a driver tries for `u`, as libpq reads them: the
    netloc's host or the `host=` query parameter(s), else PGHOST; the port likewise, else 5432."""
    hosts = u.query.get("host") or u.host or os.environ.get("PGHOST") or ""
    ports = u.query.get("port") or (str(u.port) if u.port else os.environ.get("PGPORT") or "5432")
    hosts = [h for part in ([hosts] if isinstance(hosts, str) else hosts) for h in part.split(",") if h]
    ports = [p for part in ([ports] if isinstance(ports, str) else ports) for p in part.split(",") if p]
    ports = [int(p) if p.isdigit() else 5432 for p in ports] or [5432]
    return [(h, ports[i] if i < len(ports) else ports[-1]) for i, h in enumerate(hosts)]


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it wraps (SQLAlchemy's `.orig`, `__cause__`), outermost first."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain and len(chain) < 8:
        chain.append(e)
        e = getattr(e, "orig", None) or e.__cause__
    return chain


def describe_database_error(url: str, exc: BaseException) -> str:
    """Why the database at `url` cannot be used, naming what is missing: the socket directory or
    socket file (a Unix-socket URL), the host:port nothing accepts connections at, the database
    that does not exist, the user the server refused. The URL is shown with its password masked."""
    chain = _chain(exc)
    inner = chain[-1]
    message = (str(inner).strip().splitlines() or [""])[0]
    try:
        u = make_url(url)
        where = masked_url(url)
    except Exception:  # not a URL SQLAlchemy reads: the driver's own words only
        return f"cannot use the database ({type(inner).__name__}: {message}); check DATABASE_URL"
    sqlstate = next((s for e in chain if isinstance(s := getattr(e, "sqlstate", None) or getattr(e, "pgcode", None), str)), None)
    endpoints = _endpoints(u)
    sockets = [(h, p) for h, p in endpoints if h.startswith("/")]
    tcp = [f"{h}:{p}" for h, p in endpoints if not h.startswith("/")]
    if sqlstate == "3D000":
        detail = f'the server has no database "{u.database}"'
    elif sqlstate in ("28000", "28P01"):
        detail = f'the server refused user "{u.username}" ({message})'
    elif any(isinstance(e, FileNotFoundError) for e in chain) and sockets:
        detail = "; ".join(f"the socket directory {h} does not exist" if not Path(h).is_dir()
                           else f"there is no server socket {h}/.s.PGSQL.{p} (is the server running?)" for h, p in sockets)
    elif any(isinstance(e, ConnectionRefusedError) for e in chain) and endpoints:
        places = tcp + [f"{h}/.s.PGSQL.{p}" for h, p in sockets]
        detail = f"nothing accepts connections at {', '.join(places)} (is the server running?)"
    elif any(isinstance(e, socket.gaierror) for e in chain) and tcp:
        detail = f"cannot resolve the host of {', '.join(tcp)} ({message})"
    else:
        detail = f"{type(inner).__name__}: {message}"
    return f"cannot use the database at {where}: {detail}; check DATABASE_URL"
