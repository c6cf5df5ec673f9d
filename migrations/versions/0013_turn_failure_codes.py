"""a failed turn's fixed reasons stored as codes (`lost`, `generator_failed:<kind>`) instead of English sentences

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

LOST = "This turn was lost: its worker stopped with an error. Try again."
FAILED_PREFIX = "The generator failed on this turn ("
FAILED_SUFFIX = "). Try again, or ask a moderator to check the worker''s log."


def upgrade() -> None:
    op.execute(f"UPDATE turns SET error = 'lost' WHERE error = '{LOST}'")
    op.execute(
        "UPDATE turns SET error = 'generator_failed:' || substring(error FROM '^The generator failed on this turn \\(([A-Za-z0-9_.]+)\\)') "
        f"WHERE error LIKE '{FAILED_PREFIX}%{FAILED_SUFFIX}' AND error ~ '^The generator failed on this turn \\([A-Za-z0-9_.]+\\)\\. '"
    )


def downgrade() -> None:
    op.execute(f"UPDATE turns SET error = '{LOST}' WHERE error = 'lost'")
    op.execute(
        f"UPDATE turns SET error = '{FAILED_PREFIX}' || substring(error FROM 18) || '{FAILED_SUFFIX}' "
        "WHERE error ~ '^generator_failed:[A-Za-z0-9_.]+$'"
    )
