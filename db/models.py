"""SQLAlchemy 2 models: the whole application schema (the job queue's tables are procrastinate's).

Alembic revisions under migrations/ build exactly this schema; tests/test_migrations.py checks
that autogenerate finds no difference.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Stable constraint names, so migrations can refer to them.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

SESSION_STATUSES = ("active", "paused", "archived")
TURN_STATUSES = ("queued", "running", "done", "failed", "cancelled")
PENDING_TURN_STATUSES = ("queued", "running")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _now() -> Any:
    return mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class GuildSettings(Base):
    """Per-guild configuration set by admins. NULL limits fall back to the app settings."""

    __tablename__ = "guild_settings"

    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    film_id: Mapped[str | None] = mapped_column(String(32))
    playable: Mapped[list[str] | None] = mapped_column(ARRAY(String(32)))  # NULL: every character
    admin_role_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), server_default="{}", nullable=False)
    moderator_role_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), server_default="{}", nullable=False)
    max_instruction_len: Mapped[int | None] = mapped_column(Integer)
    cooldown_seconds: Mapped[float | None] = mapped_column(Float)
    backlog_cap: Mapped[int | None] = mapped_column(Integer)
    log_channel_id: Mapped[int | None] = mapped_column(BigInteger)  # the moderation log (/admin log-channel)
    language: Mapped[str | None] = mapped_column(String(16))  # public posts' locale (/admin language); NULL: Discord's
    previews: Mapped[bool | None] = mapped_column(Boolean)  # previews while a turn runs (/admin previews); NULL: the operator's
    updated_at: Mapped[datetime] = _now()


class ChannelSettings(Base):
    """A channel's own film and cast, overriding the guild's."""

    __tablename__ = "channel_settings"

    channel_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    guild_id: Mapped[int] = mapped_column(BigInteger, nullable=False, index=True)
    film_id: Mapped[str | None] = mapped_column(String(32))
    playable: Mapped[list[str] | None] = mapped_column(ARRAY(String(32)))
    language: Mapped[str | None] = mapped_column(String(16))  # over the guild's (/admin language channel:)
    updated_at: Mapped[datetime] = _now()


class GameSession(Base):
    __tablename__ = "game_sessions"
    __table_args__ = (
        CheckConstraint(_in("status", SESSION_STATUSES), name="status"),
        # One live (active or paused) session per channel; archived ones are kept for history.
        Index(
            "uq_game_sessions_live_channel",
            "channel_id",
            unique=True,
            postgresql_where=text("status <> 'archived'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    guild_id: Mapped[int] = mapped_column(BigInteger, nullable=False, index=True)
    channel_id: Mapped[int] = mapped_column(BigInteger, nullable=False, index=True)
    film_id: Mapped[str] = mapped_column(String(32), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, server_default="active")
    next_seq: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    created_by: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = _now()
    last_activity_at: Mapped[datetime] = _now()
    # Why it is paused: a code (game.stored_reasons, NULL: no reason given), and apart from it the
    # moderator's own words when they gave some (the code is then MODERATOR_WORDS).
    paused_reason: Mapped[str | None] = mapped_column(Text)
    paused_note: Mapped[str | None] = mapped_column(Text)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    players: Mapped[list[Player]] = relationship(back_populates="session", lazy="raise")


class Player(Base):
    """Who controls which character. A row is closed (left_at) rather than deleted."""

    __tablename__ = "players"
    __table_args__ = (
        Index(
            "uq_players_live_character",
            "session_id",
            "character_id",
            unique=True,
            postgresql_where=text("left_at IS NULL"),
        ),
        Index(
            "uq_players_live_user",
            "session_id",
            "user_id",
            unique=True,
            postgresql_where=text("left_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("game_sessions.id", ondelete="CASCADE"), nullable=False)
    user_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    user_name: Mapped[str] = mapped_column(String(100), nullable=False)
    character_id: Mapped[str] = mapped_column(String(32), nullable=False)
    joined_at: Mapped[datetime] = _now()
    left_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    session: Mapped[GameSession] = relationship(back_populates="players", lazy="raise")


class CharacterStateRow(Base):
    __tablename__ = "character_states"
    __table_args__ = (
        CheckConstraint("stamina BETWEEN 0 AND 100", name="stamina"),
        CheckConstraint("social BETWEEN 0 AND 100", name="social"),
        CheckConstraint("entertainment BETWEEN 0 AND 100", name="entertainment"),
    )

    session_id: Mapped[int] = mapped_column(ForeignKey("game_sessions.id", ondelete="CASCADE"), primary_key=True)
    character_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    stamina: Mapped[int] = mapped_column(Integer, nullable=False, server_default="50")
    social: Mapped[int] = mapped_column(Integer, nullable=False, server_default="50")
    entertainment: Mapped[int] = mapped_column(Integer, nullable=False, server_default="50")
    updated_at: Mapped[datetime] = _now()


class Turn(Base):
    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        CheckConstraint(_in("status", TURN_STATUSES), name="status"),
        CheckConstraint("progress BETWEEN 0 AND 1", name="progress"),
        # The notifier's sweep: finished turns not yet posted.
        Index(
            "ix_turns_unposted",
            "finished_at",
            postgresql_where=text("status IN ('done', 'failed') AND posted_at IS NULL"),
        ),
        Index("ix_turns_author_created", "author_id", "created_at"),
        # The queue gauges (db.queue_stats) and the status messages' refresh read the waiting
        # turns only: a few among a history of millions.
        Index("ix_turns_waiting", "created_at", postgresql_where=text("status = 'queued'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    session_id: Mapped[int] = mapped_column(
        ForeignKey("game_sessions.id", ondelete="CASCADE"), nullable=False, index=True
    )
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    author_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    author_name: Mapped[str] = mapped_column(String(100), nullable=False)

    # What was asked: the structured parts (sanitised) and the final instruction text.
    characters: Mapped[list[str]] = mapped_column(ARRAY(String(32)), nullable=False)
    motion: Mapped[str] = mapped_column(String(200), nullable=False)
    adverb: Mapped[str] = mapped_column(String(100), nullable=False, server_default="")
    background: Mapped[str] = mapped_column(String(200), nullable=False)
    time_of_day: Mapped[str] = mapped_column(String(100), nullable=False, server_default="")
    instruction: Mapped[str] = mapped_column(Text, nullable=False)

    status: Mapped[str] = mapped_column(String(16), nullable=False, server_default="queued")
    progress: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")
    progress_stage: Mapped[str | None] = mapped_column(String(64))
    job_id: Mapped[int | None] = mapped_column(BigInteger)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    seed: Mapped[int] = mapped_column(BigInteger, nullable=False)

    # What the model predicted (each -5..5) and what it did to the characters.
    motion_level: Mapped[int | None] = mapped_column(Integer)
    delta_social: Mapped[int | None] = mapped_column(Integer)
    delta_entertainment: Mapped[int | None] = mapped_column(Integer)
    delta_stamina: Mapped[int | None] = mapped_column(Integer)
    motion_scope: Mapped[float | None] = mapped_column(Float)
    states_before: Mapped[dict | None] = mapped_column(JSONB)  # {character_id: {stamina, social, entertainment}}
    states_after: Mapped[dict | None] = mapped_column(JSONB)

    backend: Mapped[str | None] = mapped_column(String(32))
    is_preview: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    representation: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    mp4: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    # The latest preview of the clip while it is made (a small WebP, db.turn_previews), its number
    # in the turn (1, 2, ...); cleared when the turn ends.
    preview: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    preview_no: Mapped[int | None] = mapped_column(SmallInteger)
    mp4_size: Mapped[int | None] = mapped_column(Integer)
    clip_seconds: Mapped[float | None] = mapped_column(Float)  # the clip's length (frames / fps)
    blobs_pruned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Why it failed (game.turn_texts) or was cancelled (a code of game.stored_reasons); for a
    # cancel, who cancelled it (their name as shown then) and a moderator's own words, apart.
    error: Mapped[str | None] = mapped_column(Text)
    cancelled_by_name: Mapped[str | None] = mapped_column(String(100))
    cancel_note: Mapped[str | None] = mapped_column(Text)
    timings: Mapped[dict | None] = mapped_column(JSONB)  # seconds: queue_wait, mllm, decoder, encode, total

    created_at: Mapped[datetime] = _now()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    # Posting (exactly once): the notifier claims a turn with a lease, then records the message.
    status_message_id: Mapped[int | None] = mapped_column(BigInteger)  # the turn's one message (status, then the post)
    post_claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    post_claimed_by: Mapped[str | None] = mapped_column(String(64))
    posted_message_id: Mapped[int | None] = mapped_column(BigInteger)  # NULL once posted: not in Discord
    posted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Bounded retries: failed tries so far, the earliest next try, and why the turn was given up.
    post_attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    post_retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    post_error: Mapped[str | None] = mapped_column(Text)

    # A shot taken down (db.removal): its clip, representation and text are gone, the row stays
    # (the turn keeps its number; character states are not rewound).
    removed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    removed_reason: Mapped[str | None] = mapped_column(Text)  # a code (game.stored_reasons)
    removed_note: Mapped[str | None] = mapped_column(Text)  # the remover's own words, if any
    removed_by_id: Mapped[int | None] = mapped_column(BigInteger)  # NULL: the system
    removed_by_name: Mapped[str | None] = mapped_column(String(100))


class AuditLog(Base):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_guild_created", "guild_id", "created_at"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    guild_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    channel_id: Mapped[int | None] = mapped_column(BigInteger)
    actor_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    actor_name: Mapped[str] = mapped_column(String(100), nullable=False)
    action: Mapped[str] = mapped_column(String(64), nullable=False)
    target: Mapped[str | None] = mapped_column(String(200))
    details: Mapped[dict] = mapped_column(JSONB, nullable=False, server_default="{}")
    created_at: Mapped[datetime] = _now()


class ContentFilterTerm(Base):
    """One blocked term of a server's own filter (/admin filter; game.content_rules syntax)."""

    __tablename__ = "content_filter_terms"
    __table_args__ = (UniqueConstraint("guild_id", "term"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    guild_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    term: Mapped[str] = mapped_column(String(60), nullable=False)  # normalised (game.content_rules.parse_term)
    added_by: Mapped[int] = mapped_column(BigInteger, nullable=False)
    created_at: Mapped[datetime] = _now()


# --- vote mode: members propose actions, vote, and the winning proposal becomes the turn

VOTE_ROUND_STATUSES = ("open", "closed", "void")


class VoteChannel(Base):
    """A channel an admin put in vote mode (no row, or enabled false: players act directly)."""

    __tablename__ = "vote_channels"

    channel_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    guild_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    round_seconds: Mapped[int] = mapped_column(Integer, nullable=False, server_default="120")
    updated_at: Mapped[datetime] = _now()


class VoteRound(Base):
    """One round of a session's vote. Its deadline lives here, so a restarted bot closes it on time."""

    __tablename__ = "vote_rounds"
    __table_args__ = (
        CheckConstraint(_in("status", VOTE_ROUND_STATUSES), name="status"),
        Index("uq_vote_rounds_open_session", "session_id", unique=True, postgresql_where=text("status = 'open'")),
        Index("ix_vote_rounds_open_deadline", "deadline", postgresql_where=text("status = 'open'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("game_sessions.id", ondelete="CASCADE"), nullable=False, index=True)
    guild_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    channel_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, server_default="open")
    opened_by: Mapped[int | None] = mapped_column(BigInteger)
    opened_at: Mapped[datetime] = _now()
    deadline: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    outcome: Mapped[str | None] = mapped_column(Text)  # why it closed, as shown to the channel
    winner_id: Mapped[int | None] = mapped_column(BigInteger)  # the winning proposal
    turn_id: Mapped[int | None] = mapped_column(BigInteger)  # the turn it became
    message_id: Mapped[int | None] = mapped_column(BigInteger)  # the round's message (Discord)
    result_shown_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class VoteProposal(Base):
    """A member's proposed action (the /act fields, validated), one per member per round."""

    __tablename__ = "vote_proposals"
    __table_args__ = (UniqueConstraint("round_id", "author_id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("vote_rounds.id", ondelete="CASCADE"), nullable=False, index=True)
    author_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    author_name: Mapped[str] = mapped_column(String(100), nullable=False)
    characters: Mapped[list[str]] = mapped_column(ARRAY(String(32)), nullable=False)
    character_names: Mapped[list[str]] = mapped_column(ARRAY(String(64)), nullable=False)
    motion: Mapped[str] = mapped_column(String(200), nullable=False)
    adverb: Mapped[str] = mapped_column(String(100), nullable=False, server_default="")
    background: Mapped[str] = mapped_column(String(200), nullable=False)
    time_of_day: Mapped[str] = mapped_column(String(100), nullable=False, server_default="")
    instruction: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = _now()


class VoteBallot(Base):
    """One vote per member per round; voting again moves it."""

    __tablename__ = "vote_ballots"

    round_id: Mapped[int] = mapped_column(ForeignKey("vote_rounds.id", ondelete="CASCADE"), primary_key=True)
    voter_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    proposal_id: Mapped[int] = mapped_column(ForeignKey("vote_proposals.id", ondelete="CASCADE"), nullable=False, index=True)
    voted_at: Mapped[datetime] = _now()


# --- members' data (db/privacy.py) and servers the bot left (db/departures.py)

PRIVACY_REQUEST_STATUSES = ("pending", "done")


class PrivacyRequest(Base):
    """A member's /privacy delete, carried out step by step by a scheduled job (each step
    idempotent, so a restart halfway finishes it). Once done, the member's id and names are
    cleared from the request too: what stays is that a deletion happened, and when."""

    __tablename__ = "privacy_requests"
    __table_args__ = (
        CheckConstraint(_in("status", PRIVACY_REQUEST_STATUSES), name="status"),
        Index("ix_privacy_requests_pending", "requested_at", postgresql_where=text("status = 'pending'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int | None] = mapped_column(BigInteger)  # NULL once done
    names: Mapped[list[str] | None] = mapped_column(ARRAY(String(100)))  # found at the first step; NULL once done
    status: Mapped[str] = mapped_column(String(16), nullable=False, server_default="pending")
    step: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")  # steps done so far
    turns_removed: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    requested_at: Mapped[datetime] = _now()
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class PrivacyTombstone(Base):
    """What stands for a deleted member in one server: user id -id, name DELETED_NAME. One per
    request and server, so the member's rows in two servers cannot be linked by it."""

    __tablename__ = "privacy_tombstones"
    __table_args__ = (UniqueConstraint("request_id", "guild_id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("privacy_requests.id", ondelete="CASCADE"), nullable=False)
    guild_id: Mapped[int] = mapped_column(BigInteger, nullable=False, index=True)


class GuildDeparture(Base):
    """The bot was removed from this server: its data is deleted after delete_after, unless the
    bot is added back before (the row is then dropped)."""

    __tablename__ = "guild_departures"

    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    left_at: Mapped[datetime] = _now()
    delete_after: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class MemberNotice(Base):
    """A one-time notice a member has been shown (e.g. that the model was trained on English
    descriptions), so it is shown once per member, not on every turn. Deleted with the member's
    data (/privacy delete)."""

    __tablename__ = "member_notices"

    user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    notice: Mapped[str] = mapped_column(String(32), primary_key=True)
    shown_at: Mapped[datetime] = _now()


# --- fair shares of the GPU (docs/queue.md, "Fair order")


class QueueClock(Base):
    """A film queue's virtual clock: the virtual start of the turn its workers took last."""

    __tablename__ = "queue_clocks"

    queue_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    vtime: Mapped[float] = mapped_column(Float, nullable=False)


class QueueShare(Base):
    """A server's next virtual start on a film queue (its last one + 1 / its weight)."""

    __tablename__ = "queue_shares"

    queue_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    pass_: Mapped[float] = mapped_column("pass", Float, nullable=False)


class QueueChannel(Base):
    """A channel's last virtual start on a film queue: its server's channels take turns in order
    of it (the least recently served first)."""

    __tablename__ = "queue_channels"

    queue_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    channel_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    taken: Mapped[float] = mapped_column(Float, nullable=False)


class GuildShare(Base):
    """What the operator sets for a server (`animegamer shares set`): its weight in the fair
    order, and its quotas (turns per hour for the server, for each member; NULL: the settings')."""

    __tablename__ = "guild_shares"

    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    weight: Mapped[float] = mapped_column(Float, nullable=False, server_default="1")
    turns_per_hour: Mapped[int | None] = mapped_column(Integer)
    member_turns_per_hour: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[datetime] = _now()


class GuildShareChange(Base):
    """One change of a server's share (the audit of operator data): who, before, after."""

    __tablename__ = "guild_share_changes"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    guild_id: Mapped[int] = mapped_column(BigInteger, nullable=False, index=True)
    actor: Mapped[str] = mapped_column(String(100), nullable=False)
    before: Mapped[dict] = mapped_column(JSONB, nullable=False)
    after: Mapped[dict] = mapped_column(JSONB, nullable=False)
    created_at: Mapped[datetime] = _now()


class GuildUsage(Base):
    """A server's turns and GPU seconds (a turn's start to its result) on one UTC day."""

    __tablename__ = "guild_usage"

    guild_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    turns: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    gpu_seconds: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")
