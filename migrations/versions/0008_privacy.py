"""members' data: deletion requests (tombstones) and servers the bot left (data kept ANIMEGAMER_GUILD_DATA_DAYS)

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "privacy_requests",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=True),
        sa.Column("names", postgresql.ARRAY(sa.String(length=100)), nullable=True),
        sa.Column("status", sa.String(length=16), server_default="pending", nullable=False),
        sa.Column("step", sa.Integer(), server_default="0", nullable=False),
        sa.Column("turns_removed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('pending', 'done')", name=op.f("ck_privacy_requests_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_privacy_requests")),
    )
    op.create_index(
        "ix_privacy_requests_pending", "privacy_requests", ["requested_at"], unique=False,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_table(
        "privacy_tombstones",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("request_id", sa.BigInteger(), nullable=False),
        sa.Column("guild_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["request_id"], ["privacy_requests.id"], name=op.f("fk_privacy_tombstones_request_id_privacy_requests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_privacy_tombstones")),
        sa.UniqueConstraint("request_id", "guild_id", name=op.f("uq_privacy_tombstones_request_id_guild_id")),
    )
    op.create_index(op.f("ix_privacy_tombstones_guild_id"), "privacy_tombstones", ["guild_id"], unique=False)
    op.create_table(
        "guild_departures",
        sa.Column("guild_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("left_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("delete_after", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("guild_id", name=op.f("pk_guild_departures")),
    )


def downgrade() -> None:
    op.drop_table("guild_departures")
    op.drop_index(op.f("ix_privacy_tombstones_guild_id"), table_name="privacy_tombstones")
    op.drop_table("privacy_tombstones")
    op.drop_index("ix_privacy_requests_pending", table_name="privacy_requests", postgresql_where=sa.text("status = 'pending'"))
    op.drop_table("privacy_requests")
