"""turns: bounded posting retries (attempts, next try, why a turn was given up)

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("post_attempts", sa.Integer(), server_default="0", nullable=False))
    op.add_column("turns", sa.Column("post_retry_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("turns", sa.Column("post_error", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "post_error")
    op.drop_column("turns", "post_retry_at")
    op.drop_column("turns", "post_attempts")
