"""Game sessions, players and character states."""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from db import notify
from db.bounds import REASON_LEN, fits_bigint, free_text, name_text, require_id
from db.claims import GuildClaim, claimed
from db.dml import rowcount
from db.models import PENDING_TURN_STATUSES, CharacterStateRow, GameSession, Player, Turn
from game.catalogue import Film
from game.session_errors import CharacterTaken, SessionExists
from game.states import CharacterState
from game.stored_reasons import MODERATOR_WORDS, PAUSE_REASONS, RESET
from i18n import L_


async def session_by_id(s: AsyncSession, session_id: int, *, lock: bool = False) -> GameSession:
    """The session a row refers to (a turn's, a vote round's). Sessions are archived, never
    deleted, and those rows' session_id is a NOT NULL foreign key, so it exists; LookupError if not."""
    gs = await s.get(GameSession, session_id, with_for_update=lock)
    if gs is None:
        raise LookupError(f"game session {session_id} does not exist, yet a row refers to it")
    return gs


async def live_session(s: AsyncSession, channel_id: int, *, lock: bool = False) -> GameSession | None:
    """The channel's active or paused session."""
    if not fits_bigint(channel_id):
        return None
    q = select(GameSession).where(GameSession.channel_id == channel_id, GameSession.status != "archived")
    if lock:
        q = q.with_for_update()
    return (await s.scalars(q)).first()


async def start_session(s: AsyncSession, guild_id: int, channel_id: int, film: Film, created_by: int | None) -> GameSession:
    """A new game in the channel. The service refuses a second game (SessionExists, in
    service.players.start); a start racing it past that check is refused here, where the unique
    index on the channel's live game decides."""
    require_id(guild_id, "server id")
    require_id(channel_id, "channel id")
    if created_by is not None:
        require_id(created_by, "user id")
    gs = GameSession(guild_id=guild_id, channel_id=channel_id, film_id=film.id, created_by=created_by)
    try:
        async with s.begin_nested():  # added inside: begin_nested flushes what is pending outside it
            s.add(gs)
            await s.flush()
    except IntegrityError:  # another start won the race (a refusal db/ keeps: only the index sees it)
        raise SessionExists() from None
    await notify.notify(s, notify.SESSION_CHANGED, session_id=gs.id, channel_id=channel_id, event="started")
    return gs


async def players(s: AsyncSession, session_id: int) -> list[Player]:
    q = select(Player).where(Player.session_id == session_id, Player.left_at.is_(None)).order_by(Player.id)
    return list((await s.scalars(q)).all())


async def player_of(s: AsyncSession, session_id: int, user_id: int) -> Player | None:
    if not fits_bigint(user_id):
        return None
    q = select(Player).where(Player.session_id == session_id, Player.user_id == user_id, Player.left_at.is_(None))
    return (await s.scalars(q)).first()


async def player_of_character(s: AsyncSession, session_id: int, character_id: str) -> Player | None:
    """Who plays `character_id` in the game, if anyone."""
    q = select(Player).where(Player.session_id == session_id, Player.character_id == character_id,
                             Player.left_at.is_(None))
    return (await s.scalars(q)).first()


async def join(s: AsyncSession, gs: GameSession, film: Film, user_id: int, user_name: str, character_id: str) -> Player:
    """Take control of a character (one player per character, one character per player). The
    service checks both under the game's lock (service.players.join); a join racing past them is
    refused here, where the unique indexes decide."""
    ch = film.character(character_id)
    assert ch is not None, "the caller checks the character against the cast"
    require_id(user_id, "player id")
    user_name = name_text(user_name)
    p = Player(session_id=gs.id, user_id=user_id, user_name=user_name, character_id=ch.id)
    try:
        async with s.begin_nested():  # added inside: begin_nested flushes what is pending outside it
            s.add(p)
            await s.flush()
    except IntegrityError:  # a concurrent join won the race (a refusal db/ keeps: only the index sees it)
        raise CharacterTaken(ch.name, L_("another player")) from None
    await ensure_states(s, gs.id, [ch.id])
    await touch(s, gs.id)
    await notify.notify(s, notify.SESSION_CHANGED, session_id=gs.id, channel_id=gs.channel_id, event="joined")
    return p


async def leave(s: AsyncSession, gs: GameSession, p: Player) -> Player:
    """`p` stops playing in `gs` (the caller found them playing: service.players.leave)."""
    p.left_at = func.now()
    await s.flush()
    await notify.notify(s, notify.SESSION_CHANGED, session_id=gs.id, channel_id=gs.channel_id, event="left")
    return p


async def ensure_states(s: AsyncSession, session_id: int, character_ids: list[str]) -> None:
    """Give characters their starting states if they have none yet.

    Only the missing rows are inserted: an INSERT ... ON CONFLICT over a row a worker is updating
    (complete_turn, in its own transaction) waits for that worker to commit, while this caller
    holds the session's row lock; that wait joined lock cycles (deadlocks seen under load). Two
    callers for one session are serialised by that session lock, so the read cannot race."""
    if not character_ids:
        return
    have = set(
        (await s.scalars(
            select(CharacterStateRow.character_id)
            .where(CharacterStateRow.session_id == session_id, CharacterStateRow.character_id.in_(character_ids))
        )).all()
    )
    missing = [c for c in dict.fromkeys(character_ids) if c not in have]
    if missing:
        stmt = insert(CharacterStateRow).values([{"session_id": session_id, "character_id": c} for c in missing])
        await s.execute(stmt.on_conflict_do_nothing())


async def states(s: AsyncSession, session_id: int, *, lock: bool = False) -> dict[str, CharacterState]:
    q = select(CharacterStateRow).where(CharacterStateRow.session_id == session_id).order_by(CharacterStateRow.character_id)
    if lock:
        q = q.with_for_update()
    rows = (await s.scalars(q)).all()
    return {r.character_id: CharacterState(r.stamina, r.social, r.entertainment) for r in rows}


async def touch(s: AsyncSession, session_id: int) -> None:
    await s.execute(update(GameSession).where(GameSession.id == session_id).values(last_activity_at=func.now()))


async def set_paused(s: AsyncSession, gs: GameSession, paused: bool, reason: str | None = None,
                     note: str | None = None) -> GameSession:
    """Pause or resume. `reason`: a pause code (game.stored_reasons; None: no reason given), `note`:
    a moderator's own words (stored cleaned, under MODERATOR_WORDS). Whether a game may resume is
    the service's check (service.moderation.resume)."""
    note = free_text(note, REASON_LEN) if paused else None
    if note:
        reason = MODERATOR_WORDS
    elif reason == MODERATOR_WORDS:
        reason = None  # words that cleaned to nothing: no reason given
    if reason is not None and reason not in PAUSE_REASONS:
        raise ValueError(f"unknown pause reason {reason!r} (game.stored_reasons.PAUSE_REASONS)")
    gs.status = "paused" if paused else "active"
    gs.paused_reason, gs.paused_note = (reason, note) if paused else (None, None)
    if not paused:
        gs.last_activity_at = func.now()
    await s.flush()
    await notify.notify(s, notify.SESSION_CHANGED, session_id=gs.id, channel_id=gs.channel_id, event=gs.status)
    return gs


async def cancel_pending(s: AsyncSession, session_id: int, reason: str) -> int:
    """Cancel every queued turn of a session (running ones finish; their result is kept); `reason`:
    a cancel code (game.stored_reasons)."""
    return await rowcount(
        s,
        update(Turn)
        .where(Turn.session_id == session_id, Turn.status == "queued")
        .values(status="cancelled", error=reason, finished_at=func.now()),
    )


async def reset(s: AsyncSession, gs: GameSession, by: int | None) -> GameSession:
    """Archive the session and start a fresh one in the channel: same film, same players,
    every character back to the starting states. Queued turns are cancelled."""
    await cancel_pending(s, gs.id, RESET)
    kept = await players(s, gs.id)
    gs.status = "archived"
    gs.archived_at = func.now()
    await s.flush()
    fresh = GameSession(guild_id=gs.guild_id, channel_id=gs.channel_id, film_id=gs.film_id, created_by=by)
    s.add(fresh)
    await s.flush()
    for p in kept:
        s.add(Player(session_id=fresh.id, user_id=p.user_id, user_name=p.user_name, character_id=p.character_id))
    await s.flush()
    await ensure_states(s, fresh.id, [p.character_id for p in kept])
    await notify.notify(s, notify.SESSION_CHANGED, session_id=fresh.id, channel_id=gs.channel_id, event="reset")
    return fresh


async def idle_sessions(s: AsyncSession, idle: timedelta, claim: GuildClaim | None = None) -> list[GameSession]:
    """Active sessions with no activity for `idle` and no pending turns, locked until the
    transaction ends (another bot's check skips them); only those of `claim`'s servers (a bot
    process's shards: bot.parts.shards.ShardClaim), every server's when None."""
    pending = select(Turn.id).where(Turn.session_id == GameSession.id, Turn.status.in_(PENDING_TURN_STATUSES))
    q = (
        select(GameSession)
        .where(
            GameSession.status == "active",
            GameSession.last_activity_at < func.now() - idle,
            ~pending.exists(),
            claimed(GameSession.guild_id, claim),
        )
        .order_by(GameSession.id)
        .with_for_update(skip_locked=True)
    )
    return list((await s.scalars(q)).all())


async def withdrawn_sessions(
    s: AsyncSession, known_films: Collection[str], claim: GuildClaim | None = None
) -> list[GameSession]:
    """Active sessions whose film is no longer in the catalogue, locked like idle_sessions; only
    those of `claim`'s servers when given."""
    q = (
        select(GameSession)
        .where(
            GameSession.status == "active",
            GameSession.film_id.not_in(list(known_films)),
            claimed(GameSession.guild_id, claim),
        )
        .order_by(GameSession.id)
        .with_for_update(skip_locked=True)
    )
    return list((await s.scalars(q)).all())

