"""turns.clip_seconds: each clip's length, so /export sizes its bitrate without probing the files

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 00:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("clip_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "clip_seconds")
