"""content rules: per-server blocked terms (/admin filter), refusals recorded

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Refusals are audit_log entries (action instruction_refused / reason_refused): no table of their own.
    op.create_table(
        "content_filter_terms",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("guild_id", sa.BigInteger(), nullable=False),
        sa.Column("term", sa.String(length=60), nullable=False),
        sa.Column("added_by", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_content_filter_terms")),
        sa.UniqueConstraint("guild_id", "term", name=op.f("uq_content_filter_terms_guild_id_term")),
    )


def downgrade() -> None:
    op.drop_table("content_filter_terms")
