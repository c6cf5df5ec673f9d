"""fair shares of the GPU (issue #39): the fair order's state, servers' weights and quotas, usage

- `queue_clocks`, `queue_shares`, `queue_channels`: what the fair fetch
  (inference/procrastinate_adapter.py) keeps per film queue: its virtual clock, each server's
  next virtual start (`pass`), each channel's last virtual start (docs/queue.md, "Fair order");
- `guild_shares`: what the operator sets per server (weight, turns per hour for the server and
  for each member), each change kept in `guild_share_changes`;
- `guild_usage`: turns and GPU seconds per server per day.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queue_clocks",
        sa.Column("queue_name", sa.String(128), nullable=False),
        sa.Column("vtime", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("queue_name", name=op.f("pk_queue_clocks")),
    )
    op.create_table(
        "queue_shares",
        sa.Column("queue_name", sa.String(128), nullable=False),
        sa.Column("guild_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("pass", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("queue_name", "guild_id", name=op.f("pk_queue_shares")),
    )
    op.create_table(
        "queue_channels",
        sa.Column("queue_name", sa.String(128), nullable=False),
        sa.Column("channel_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("taken", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("queue_name", "channel_id", name=op.f("pk_queue_channels")),
    )
    op.create_table(
        "guild_shares",
        sa.Column("guild_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("weight", sa.Float(), server_default="1", nullable=False),
        sa.Column("turns_per_hour", sa.Integer(), nullable=True),
        sa.Column("member_turns_per_hour", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("guild_id", name=op.f("pk_guild_shares")),
    )
    op.create_table(
        "guild_share_changes",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("guild_id", sa.BigInteger(), nullable=False),
        sa.Column("actor", sa.String(100), nullable=False),
        sa.Column("before", JSONB(), nullable=False),
        sa.Column("after", JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_guild_share_changes")),
    )
    op.create_index(op.f("ix_guild_share_changes_guild_id"), "guild_share_changes", ["guild_id"], unique=False)
    op.create_table(
        "guild_usage",
        sa.Column("guild_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("turns", sa.Integer(), server_default="0", nullable=False),
        sa.Column("gpu_seconds", sa.Float(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("guild_id", "day", name=op.f("pk_guild_usage")),
    )
    # A server's quota counts the turns of its games in the last hour.
    op.create_index(op.f("ix_game_sessions_guild_id"), "game_sessions", ["guild_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_game_sessions_guild_id"), table_name="game_sessions")
    op.drop_index(op.f("ix_guild_share_changes_guild_id"), table_name="guild_share_changes")
    for table in ("guild_usage", "guild_share_changes", "guild_shares", "queue_channels", "queue_shares", "queue_clocks"):
        op.drop_table(table)
