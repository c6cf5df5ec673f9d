"""why a game is paused and why a turn was cancelled stored as codes (game.stored_reasons) instead
of English or server-language sentences; a moderator's own words and who cancelled kept apart
(game_sessions.paused_note, turns.cancelled_by_name, turns.cancel_note)

A cancel the bot stored worded in another language than English stays as written (shown as it
is). `cancelled by <name>: <words>` is split at its first ": " (a name holding ": " splits early;
the downgrade joins it back as it was).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# (English as stored before, code)
PAUSES = (("film withdrawn", "film_withdrawn"), ("paused by a moderator", "moderator"))
CANCELS = (("the game was reset", "reset"), ("cancelled by a moderator", "cancelled_by_moderator"))
FIXED_PAUSES = ("idle", "film withdrawn", "paused by a moderator")  # 'idle' is its own code
CANCELLED = "status = 'cancelled'"
BY = "^cancelled by (.+?)(: (.*))?$"  # the name, then ": " and the moderator's words, if any


def upgrade() -> None:
    op.add_column("game_sessions", sa.Column("paused_note", sa.Text(), nullable=True))
    op.add_column("turns", sa.Column("cancelled_by_name", sa.String(length=100), nullable=True))
    op.add_column("turns", sa.Column("cancel_note", sa.Text(), nullable=True))
    fixed = ", ".join(f"'{t}'" for t in FIXED_PAUSES)
    op.execute("UPDATE game_sessions SET paused_note = paused_reason, paused_reason = 'moderator_words' "
               f"WHERE paused_reason IS NOT NULL AND paused_reason NOT IN ({fixed})")
    for text, code in PAUSES:
        op.execute(f"UPDATE game_sessions SET paused_reason = '{code}' WHERE paused_reason = '{text}'")
    for text, code in CANCELS:
        op.execute(f"UPDATE turns SET error = '{code}' WHERE {CANCELLED} AND error = '{text}'")
    # `cancelled by <name>`: by its author when the name is theirs (the turn's button), else by a
    # moderator (/mod cancel, or the button).
    said = f"regexp_match(error, '{BY}')"
    op.execute(
        f"UPDATE turns SET cancelled_by_name = left(({said})[1], 100), cancel_note = ({said})[3], "
        f"error = CASE WHEN ({said})[3] IS NULL AND ({said})[1] = author_name "
        "THEN 'cancelled_by_author' ELSE 'cancelled_by_moderator' END "
        f"WHERE {CANCELLED} AND error ~ '{BY}'"
    )


def downgrade() -> None:
    op.execute(
        "UPDATE turns SET error = 'cancelled by ' || cancelled_by_name || coalesce(': ' || cancel_note, '') "
        f"WHERE {CANCELLED} AND error IN ('cancelled_by_author', 'cancelled_by_moderator') AND cancelled_by_name IS NOT NULL"
    )
    op.execute(f"UPDATE turns SET error = 'cancelled' WHERE {CANCELLED} AND error = 'cancelled_by_author'")
    for text, code in CANCELS:
        op.execute(f"UPDATE turns SET error = '{text}' WHERE {CANCELLED} AND error = '{code}'")
    for text, code in PAUSES:
        op.execute(f"UPDATE game_sessions SET paused_reason = '{text}' WHERE paused_reason = '{code}'")
    op.execute("UPDATE game_sessions SET paused_reason = paused_note WHERE paused_reason = 'moderator_words'")
    op.drop_column("turns", "cancel_note")
    op.drop_column("turns", "cancelled_by_name")
    op.drop_column("game_sessions", "paused_note")
