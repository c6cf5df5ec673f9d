"""turns: a shot taken down by a moderator or its author (/mod remove, Remove shot); the moderation log channel

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("turns", sa.Column("removed_reason", sa.Text(), nullable=True))
    op.add_column("turns", sa.Column("removed_by_id", sa.BigInteger(), nullable=True))
    op.add_column("turns", sa.Column("removed_by_name", sa.String(100), nullable=True))
    op.add_column("guild_settings", sa.Column("log_channel_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("guild_settings", "log_channel_id")
    op.drop_column("turns", "removed_by_name")
    op.drop_column("turns", "removed_by_id")
    op.drop_column("turns", "removed_reason")
    op.drop_column("turns", "removed_at")
