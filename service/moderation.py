"""Moderators' actions: pause, resume, reset, cancel a queued turn, kick a player. Each is
audited in its transaction (service.game.Game.record)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from db import sessions
from db.models import GameSession, Player, Turn
from db.turn_reads import get_turn, pending_turns, turn_by_seq
from game.content_rules import RuleSet
from game.errors import PlayerNotInGame, TurnNotFound
from service.game import Game, Member, Place
from service.players import config


@dataclass(frozen=True)
class Reset:
    old: GameSession
    fresh: GameSession
    cancelled: list[Turn]  # the turns that were waiting (queued), now cancelled


async def _reason_allowed(game: Game, s: AsyncSession, place: Place, reason: str | None,
                          extra_rules: Sequence[RuleSet]) -> None:
    """A reason shown to the players goes through the content rules (ContentRefused names the rule set)."""
    if reason:
        (await config(game, s, place)).require_allowed("reason", (reason,), extra_rules)


async def pause(game: Game, place: Place, who: Member, reason: str | None = None,
                extra_rules: Sequence[RuleSet] = ()) -> GameSession:
    """No new turns until resumed; `reason` is shown to the players (stored cleaned)."""
    async with game.sessions.begin() as s:
        await _reason_allowed(game, s, place, reason, extra_rules)
        gs = await sessions.require_session(s, place.channel_id, lock=True)
        await sessions.set_paused(s, gs, True, reason)
        await game.record(s, place, who, "pause", f"session {gs.id}", reason=reason)
    return gs


async def resume(game: Game, place: Place, who: Member) -> GameSession:
    async with game.sessions.begin() as s:
        gs = await sessions.require_session(s, place.channel_id, lock=True)
        await sessions.set_paused(s, gs, False)
        await game.record(s, place, who, "resume", f"session {gs.id}")
    return gs


async def reset_session(game: Game, s: AsyncSession, gs: GameSession, who: Member) -> Reset:
    """Archive `gs` (locked by the caller) and start again with the same players; the waiting
    turns are cancelled and so are their jobs, which would only hold the game's place in the queue."""
    waiting = [t for t in await pending_turns(s, gs.id) if t.status == "queued"]
    fresh = await sessions.reset(s, gs, by=who.id)
    await game.jobs.cancel_stale_jobs(s, gs.id)
    return Reset(gs, fresh, waiting)


async def reset(game: Game, place: Place, who: Member) -> Reset:
    """Archive the game and start again: same players, every character back to the start."""
    async with game.sessions.begin() as s:
        gs = await sessions.require_session(s, place.channel_id, lock=True)
        done = await reset_session(game, s, gs, who)
        await game.record(s, place, who, "reset", f"session {gs.id}", new_session=done.fresh.id,
                          cancelled=len(done.cancelled))
    return done


async def _turn(s: AsyncSession, place: Place, seq: int | None, turn_id: int | None) -> Turn:
    """A turn of the channel's live game by its number, or any of the channel's turns by id."""
    if seq is not None:
        gs = await sessions.require_session(s, place.channel_id)
        return await turn_by_seq(s, gs.id, seq)
    t = None if turn_id is None else await get_turn(s, turn_id)
    if t is None or (await sessions.session_by_id(s, t.session_id)).channel_id != place.channel_id:
        raise TurnNotFound(turn_id if turn_id is not None else "?")
    return t


async def cancel(game: Game, place: Place, who: Member, *, seq: int | None = None, turn_id: int | None = None,
                 stored: str, reason: str | None = None, extra_rules: Sequence[RuleSet] = ()) -> Turn:
    """Cancel a queued turn (by its number in the live game, or by id) and its job. `stored`: why,
    as the turn keeps it; `reason`: the moderator's own words, content-checked and audited."""
    async with game.sessions.begin() as s:
        await _reason_allowed(game, s, place, reason, extra_rules)
        row = await _turn(s, place, seq, turn_id)
        await game.jobs.cancel_queued_turn(s, row, stored)
        await game.record(s, place, who, "cancel_turn", str(row.seq), turn_id=row.id, reason=reason)
    return row


async def turn_id_of(game: Game, place: Place, seq: int, reason: str | None = None,
                     extra_rules: Sequence[RuleSet] = ()) -> int:
    """The id of turn `seq` of the channel's live game, for an action whose `reason` the players see."""
    async with game.sessions() as s:
        await _reason_allowed(game, s, place, reason, extra_rules)
        return (await _turn(s, place, seq, None)).id


async def kick(game: Game, place: Place, who: Member, player: Member) -> tuple[GameSession, Player]:
    """Remove a player from the game: their character is free to join."""
    async with game.sessions.begin() as s:
        gs = await sessions.require_session(s, place.channel_id)
        if await sessions.player_of(s, gs.id, player.id) is None:
            raise PlayerNotInGame(player.name or "")
        p = await sessions.leave(s, gs, player.id)
        await game.record(s, place, who, "kick", str(player.id), player=player.name, character=p.character_id)
    return gs, p
