"""languages: the public posts' locale per server and channel (/admin language), one-time member notices

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("guild_settings", sa.Column("language", sa.String(length=16), nullable=True))
    op.add_column("channel_settings", sa.Column("language", sa.String(length=16), nullable=True))
    op.create_table(
        "member_notices",
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("notice", sa.String(length=32), nullable=False),
        sa.Column("shown_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "notice", name=op.f("pk_member_notices")),
    )


def downgrade() -> None:
    op.drop_table("member_notices")
    op.drop_column("channel_settings", "language")
    op.drop_column("guild_settings", "language")
