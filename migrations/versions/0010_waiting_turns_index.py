"""the waiting turns' partial index: the queue gauges, scraped every few seconds, read only them

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_turns_waiting", "turns", ["created_at"], postgresql_where=sa.text("status = 'queued'"))


def downgrade() -> None:
    op.drop_index("ix_turns_waiting", table_name="turns")
