"""audit entries name a turn by its number: the target `turn #4` (an English rendering) becomes `4`

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TURN_ACTIONS = "('cancel_turn', 'regenerate_turn', 'remove_shot', 'report_shot')"


def upgrade() -> None:
    op.execute(
        f"UPDATE audit_log SET target = substring(target FROM 7) "
        f"WHERE action IN {TURN_ACTIONS} AND target ~ '^turn #[0-9]+$'"
    )


def downgrade() -> None:
    op.execute(f"UPDATE audit_log SET target = 'turn #' || target WHERE action IN {TURN_ACTIONS} AND target ~ '^[0-9]+$'")
