"""vote mode: per-channel mode, rounds (deadline in the row), proposals, one ballot per member

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 23:56:02.384684
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('vote_channels',
    sa.Column('channel_id', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('guild_id', sa.BigInteger(), nullable=False),
    sa.Column('enabled', sa.Boolean(), server_default='false', nullable=False),
    sa.Column('round_seconds', sa.Integer(), server_default='120', nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('channel_id', name=op.f('pk_vote_channels'))
    )
    op.create_table('vote_rounds',
    sa.Column('id', sa.BigInteger(), nullable=False),
    sa.Column('session_id', sa.BigInteger(), nullable=False),
    sa.Column('guild_id', sa.BigInteger(), nullable=False),
    sa.Column('channel_id', sa.BigInteger(), nullable=False),
    sa.Column('status', sa.String(length=16), server_default='open', nullable=False),
    sa.Column('opened_by', sa.BigInteger(), nullable=True),
    sa.Column('opened_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('deadline', sa.DateTime(timezone=True), nullable=False),
    sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('outcome', sa.Text(), nullable=True),
    sa.Column('winner_id', sa.BigInteger(), nullable=True),
    sa.Column('turn_id', sa.BigInteger(), nullable=True),
    sa.Column('message_id', sa.BigInteger(), nullable=True),
    sa.Column('result_shown_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('open', 'closed', 'void')", name=op.f('ck_vote_rounds_status')),
    sa.ForeignKeyConstraint(['session_id'], ['game_sessions.id'], name=op.f('fk_vote_rounds_session_id_game_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_vote_rounds'))
    )
    op.create_index('ix_vote_rounds_open_deadline', 'vote_rounds', ['deadline'], unique=False, postgresql_where=sa.text("status = 'open'"))
    op.create_index(op.f('ix_vote_rounds_session_id'), 'vote_rounds', ['session_id'], unique=False)
    op.create_index('uq_vote_rounds_open_session', 'vote_rounds', ['session_id'], unique=True, postgresql_where=sa.text("status = 'open'"))
    op.create_table('vote_proposals',
    sa.Column('id', sa.BigInteger(), nullable=False),
    sa.Column('round_id', sa.BigInteger(), nullable=False),
    sa.Column('author_id', sa.BigInteger(), nullable=False),
    sa.Column('author_name', sa.String(length=100), nullable=False),
    sa.Column('characters', postgresql.ARRAY(sa.String(length=32)), nullable=False),
    sa.Column('character_names', postgresql.ARRAY(sa.String(length=64)), nullable=False),
    sa.Column('motion', sa.String(length=200), nullable=False),
    sa.Column('adverb', sa.String(length=100), server_default='', nullable=False),
    sa.Column('background', sa.String(length=200), nullable=False),
    sa.Column('time_of_day', sa.String(length=100), server_default='', nullable=False),
    sa.Column('instruction', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['vote_rounds.id'], name=op.f('fk_vote_proposals_round_id_vote_rounds'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_vote_proposals')),
    sa.UniqueConstraint('round_id', 'author_id', name=op.f('uq_vote_proposals_round_id_author_id'))
    )
    op.create_index(op.f('ix_vote_proposals_round_id'), 'vote_proposals', ['round_id'], unique=False)
    op.create_table('vote_ballots',
    sa.Column('round_id', sa.BigInteger(), nullable=False),
    sa.Column('voter_id', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('proposal_id', sa.BigInteger(), nullable=False),
    sa.Column('voted_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['proposal_id'], ['vote_proposals.id'], name=op.f('fk_vote_ballots_proposal_id_vote_proposals'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['round_id'], ['vote_rounds.id'], name=op.f('fk_vote_ballots_round_id_vote_rounds'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('round_id', 'voter_id', name=op.f('pk_vote_ballots'))
    )
    op.create_index(op.f('ix_vote_ballots_proposal_id'), 'vote_ballots', ['proposal_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_vote_ballots_proposal_id'), table_name='vote_ballots')
    op.drop_table('vote_ballots')
    op.drop_index(op.f('ix_vote_proposals_round_id'), table_name='vote_proposals')
    op.drop_table('vote_proposals')
    op.drop_index('uq_vote_rounds_open_session', table_name='vote_rounds', postgresql_where=sa.text("status = 'open'"))
    op.drop_index(op.f('ix_vote_rounds_session_id'), table_name='vote_rounds')
    op.drop_index('ix_vote_rounds_open_deadline', table_name='vote_rounds', postgresql_where=sa.text("status = 'open'"))
    op.drop_table('vote_rounds')
    op.drop_table('vote_channels')
