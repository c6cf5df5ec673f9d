"""job queue: procrastinate 3.10.0's schema

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 15:40:00

The SQL is procrastinate's own `sql/schema.sql` of version 3.10.0, vendored next to this file
(`procrastinate-3.10.0-schema.sql`) so that this revision never changes when the installed
package does. When procrastinate is upgraded, add a revision that applies the files of its
`sql/migrations/` newer than 3.10.0 (tests/queue/test_migration.py notices the change).
"""

from __future__ import annotations

import re
from pathlib import Path

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SCHEMA_FILE = Path(__file__).with_name("procrastinate-3.10.0-schema.sql")


def split_statements(sql: str) -> list[str]:
    """Split a SQL script on top-level semicolons (outside comments, strings and $$ bodies).

    The asyncpg driver prepares every statement, and a prepared statement holds one command."""
    out, buf, i, n = [], [], 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("$$", i):
            j = sql.index("$$", i + 2) + 2
            buf.append(sql[i:j])
            i = j
            continue
        if c == "'":
            j = i + 1
            while True:
                j = sql.index("'", j)
                if sql.startswith("''", j):
                    j += 2
                    continue
                break
            buf.append(sql[i : j + 1])
            i = j + 1
            continue
        if c == ";":
            stmt = "".join(buf).strip()
            if stmt:
                out.append(stmt)
            buf = []
        else:
            buf.append(c)
        i += 1
    tail = "".join(buf).strip()
    if tail:
        out.append(tail)
    return out


def _names(kind: str) -> list[str]:
    return re.findall(rf"CREATE {kind} (procrastinate_\w+)", SCHEMA_FILE.read_text())


def upgrade() -> None:
    bind = op.get_bind()
    for stmt in split_statements(SCHEMA_FILE.read_text()):
        bind.exec_driver_sql(stmt)


def downgrade() -> None:
    bind = op.get_bind()
    # Tables first (their triggers and indexes go with them), then functions, then types.
    tables = ", ".join(reversed(_names("TABLE")))
    bind.exec_driver_sql(f"DROP TABLE IF EXISTS {tables} CASCADE")
    for fn in _names("FUNCTION"):
        bind.exec_driver_sql(f"DROP FUNCTION IF EXISTS {fn}")
    types = ", ".join(reversed(_names("TYPE")))
    bind.exec_driver_sql(f"DROP TYPE IF EXISTS {types}")
