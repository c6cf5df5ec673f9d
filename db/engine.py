"""Database URLs, the async engine and the session factory."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

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
