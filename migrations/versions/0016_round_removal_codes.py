"""how a vote round ended and why a shot was taken down stored as codes (game.stored_reasons)
instead of English sentences; the words a shot's remover typed kept apart (turns.removed_note)

A winner's line (`Option N won with ...: it is turn #S.`) becomes the code `won`: the readers word
it from the round, as they did; the downgrade writes it back from the round's proposals, ballots
and turn. Any other text left in either column (none is written) stays as it is.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# (English as stored before, code)
OUTCOMES = (
    ("Voting was turned off in this channel; this round is void.", "voided_mode"),
    ("The game was paused; this round is void and no turn was played.", "voided_pause"),
    ("The game was reset or ended; this round is void and no turn was played.", "voided_end"),
    ("Nobody proposed an action: no turn this round.", "no_proposals"),
)
PRIVACY = ("privacy: its author deleted their data", "privacy_deleted")
REMOVAL_CODES = ("removed", "privacy_deleted", "remover_words")

# The winner's line as db.votes wrote it: its option number (proposal order), votes, ties, turn.
WINNER_LINE = """
WITH tally AS (
    SELECT p.round_id, p.id, row_number() OVER (PARTITION BY p.round_id ORDER BY p.id) AS number,
           (SELECT count(*) FROM vote_ballots b WHERE b.proposal_id = p.id) AS votes
    FROM vote_proposals p
), winner AS (
    SELECT r.id, w.number, w.votes, t.seq,
           (SELECT count(*) FROM tally o WHERE o.round_id = r.id AND o.votes = w.votes) AS tied
    FROM vote_rounds r JOIN tally w ON w.id = r.winner_id JOIN turns t ON t.id = r.turn_id
    WHERE r.outcome = 'won' AND r.status = 'closed'
)
UPDATE vote_rounds r SET outcome = 'Option ' || winner.number || ' won with ' || winner.votes || ' vote(s)'
    || CASE WHEN winner.tied > 1 THEN ', the earliest of ' || winner.tied || ' tied options' ELSE '' END
    || ': it is turn #' || winner.seq || '.'
FROM winner WHERE winner.id = r.id
"""


def upgrade() -> None:
    for text, code in OUTCOMES:
        op.execute(sa.text("UPDATE vote_rounds SET outcome = :code WHERE outcome = :text").bindparams(code=code, text=text))
    op.execute("UPDATE vote_rounds SET outcome = 'won' "
               "WHERE status = 'closed' AND turn_id IS NOT NULL AND outcome LIKE 'Option % won with %'")
    op.add_column("turns", sa.Column("removed_note", sa.Text(), nullable=True))
    op.execute(sa.text("UPDATE turns SET removed_reason = :code WHERE removed_reason = :text").bindparams(
        code=PRIVACY[1], text=PRIVACY[0]))
    codes = ", ".join(f"'{c}'" for c in REMOVAL_CODES)
    op.execute("UPDATE turns SET removed_note = removed_reason, removed_reason = 'remover_words' "
               f"WHERE removed_reason IS NOT NULL AND removed_reason NOT IN ({codes})")


def downgrade() -> None:
    op.execute("UPDATE turns SET removed_reason = coalesce(removed_note, 'removed') WHERE removed_reason = 'remover_words'")
    op.execute(sa.text("UPDATE turns SET removed_reason = :text WHERE removed_reason = :code").bindparams(
        code=PRIVACY[1], text=PRIVACY[0]))
    op.drop_column("turns", "removed_note")
    op.execute(WINNER_LINE)
    for text, code in OUTCOMES:
        op.execute(sa.text("UPDATE vote_rounds SET outcome = :text WHERE outcome = :code").bindparams(code=code, text=text))
