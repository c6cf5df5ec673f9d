"""previews while a turn runs: the latest still on the turn, and each server's choice

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("preview", sa.LargeBinary(), nullable=True))
    op.add_column("turns", sa.Column("preview_no", sa.SmallInteger(), nullable=True))
    op.add_column("guild_settings", sa.Column("previews", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("guild_settings", "previews")
    op.drop_column("turns", "preview_no")
    op.drop_column("turns", "preview")
