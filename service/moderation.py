"""Moderators' actions: pause, resume, reset, cancel a queued turn, regenerate the latest turn,
kick a player. Each is audited in its transaction (service.deps.Deps.record). A turn's author may
also cancel or regenerate their own turn (`cancel_own`, `regenerate`): not audited then."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from db import sessions
from db.models import GameSession, Turn
from db.turn_reads import get_turn, pending_turns, turn_by_seq
from db.turns import note_canceller
from game.catalogue import session_film
from game.content_rules import RuleSet
from game.session_errors import GameEnded, PlayerNotInGame
from game.stored_reasons import CANCELLED_BY_AUTHOR, CANCELLED_BY_MODERATOR
from game.turn_errors import NotTurnAuthor, TurnNotFound
from service.configs import config
from service.deps import Deps, Member, Place
from service.names import shown_name
from service.refusals import live_session
from service.results import PlayerView, SessionRef, TurnRef
from service.turn_queue import regenerate_latest


@dataclass(frozen=True)
class Regenerated:
    session: SessionRef
    turn: TurnRef  # the new take, queued under the same number
    position: int | None
    old_message: int | None  # the previous take's message (its status message, or the post it became)


@dataclass(frozen=True)
class Reset:
    old: SessionRef
    fresh: SessionRef
    cancelled: tuple[TurnRef, ...]  # the turns that were waiting (queued), now cancelled


async def _reason_allowed(deps: Deps, s: AsyncSession, place: Place, reason: str | None,
                          extra_rules: Sequence[RuleSet]) -> None:
    """A reason shown to the players goes through the content rules (ContentRefused names the rule set)."""
    if reason:
        (await config(deps, s, place)).require_allowed("reason", (reason,), extra_rules)


async def pause(deps: Deps, place: Place, who: Member, reason: str | None = None,
                extra_rules: Sequence[RuleSet] = (), *, code: str | None = None) -> SessionRef:
    """No new turns until resumed; `reason`: the moderator's own words, shown to the players
    (stored cleaned, apart from the code); `code`: why, when they gave none (game.stored_reasons;
    None: no reason shown)."""
    async with deps.sessions.begin() as s:
        await _reason_allowed(deps, s, place, reason, extra_rules)
        gs = await live_session(s, place.channel_id, lock=True)
        await sessions.set_paused(s, gs, True, code, note=reason)
        await deps.record(s, place, who, "pause", f"session {gs.id}", reason=reason)
        return SessionRef.of(gs)


async def resume(deps: Deps, place: Place, who: Member) -> SessionRef:
    """Refused for a game whose film left the catalogue (FilmWithdrawn): no worker serves it, and
    the withdrawn-film check would pause it again with another notice."""
    async with deps.sessions.begin() as s:
        gs = await live_session(s, place.channel_id, lock=True)
        session_film(gs.film_id)
        await sessions.set_paused(s, gs, False)
        await deps.record(s, place, who, "resume", f"session {gs.id}")
        return SessionRef.of(gs)


async def reset_session(deps: Deps, s: AsyncSession, gs: GameSession, who: Member) -> tuple[GameSession, list[Turn]]:
    """Archive `gs` (locked by the caller) and start again with the same players: the fresh game,
    and the turns that were waiting, cancelled with their jobs (which would only hold the game's
    place in the queue)."""
    waiting = [t for t in await pending_turns(s, gs.id) if t.status == "queued"]
    fresh = await sessions.reset(s, gs, by=who.id)
    await deps.jobs.cancel_stale_jobs(s, gs.id)
    return fresh, waiting


async def reset(deps: Deps, place: Place, who: Member) -> Reset:
    """Archive the game and start again: same players, every character back to the start."""
    async with deps.sessions.begin() as s:
        gs = await live_session(s, place.channel_id, lock=True)
        fresh, cancelled = await reset_session(deps, s, gs, who)
        await deps.record(s, place, who, "reset", f"session {gs.id}", new_session=fresh.id, cancelled=len(cancelled))
        return Reset(SessionRef.of(gs), SessionRef.of(fresh), tuple(TurnRef.of(t) for t in cancelled))


async def _turn(s: AsyncSession, place: Place, seq: int | None, turn_id: int | None) -> Turn:
    """A turn of the channel's live game by its number, or any of the channel's turns by id."""
    if seq is not None:
        gs = await live_session(s, place.channel_id)
        t = await turn_by_seq(s, gs.id, seq)
        if t is None:
            raise TurnNotFound(seq)
        return t
    t = None if turn_id is None else await get_turn(s, turn_id)
    if t is None or (await sessions.session_by_id(s, t.session_id)).channel_id != place.channel_id:
        raise TurnNotFound(turn_id if turn_id is not None else "?")
    return t


async def cancel(deps: Deps, place: Place, who: Member, *, seq: int | None = None, turn_id: int | None = None,
                 reason: str | None = None, extra_rules: Sequence[RuleSet] = ()) -> TurnRef:
    """Cancel a queued turn (by its number in the live game, or by id) and its job, kept as
    cancelled by a moderator: `who` by name (one without a name, the play page's: "a moderator");
    `reason`: the moderator's own words, content-checked, kept on the turn and audited."""
    async with deps.sessions.begin() as s:
        await _reason_allowed(deps, s, place, reason, extra_rules)
        row = await _turn(s, place, seq, turn_id)
        await deps.jobs.cancel_queued_turn(s, row, CANCELLED_BY_MODERATOR)
        await note_canceller(s, row, who.name, reason)
        await deps.record(s, place, who, "cancel_turn", str(row.seq), turn_id=row.id, reason=reason)
        return TurnRef.of(row)


async def _own_or_moderated(s: AsyncSession, turn_id: int, who: Member, moderator: bool, verb: str) -> Turn:
    """Turn `turn_id`, if `who` asked for it or is a moderator."""
    turn = await get_turn(s, turn_id)
    if turn is None:
        raise TurnNotFound(turn_id)
    if not (who.id == turn.author_id or moderator):
        raise NotTurnAuthor(shown_name(turn.author_name), verb)
    return turn


async def cancel_own(deps: Deps, place: Place, who: Member, turn_id: int, *, moderator: bool) -> TurnRef:
    """Cancel a queued turn its author asked for, or any one for a moderator (then audited, `via`
    the turn's button); kept as cancelled by `who`, by name."""
    async with deps.sessions.begin() as s:
        turn = await _own_or_moderated(s, turn_id, who, moderator, "cancel")
        own = who.id == turn.author_id
        await deps.jobs.cancel_queued_turn(s, turn, CANCELLED_BY_AUTHOR if own else CANCELLED_BY_MODERATOR)
        await note_canceller(s, turn, who.name)
        if who.id != turn.author_id:
            await deps.record(s, place, who, "cancel_turn", str(turn.seq), turn_id=turn.id, via="button")
        return TurnRef.of(turn)


async def regenerate(deps: Deps, place: Place, who: Member, turn_id: int | None = None, *,
                     moderator: bool) -> Regenerated:
    """Generate the live game's latest turn again with a new seed (its effect on the characters is
    undone first). `turn_id`: the take a member clicked, which must still be that latest turn and
    theirs unless they moderate; None: the latest turn of the channel's live game."""
    async with deps.sessions.begin() as s:
        if turn_id is None:
            gs, turn = await live_session(s, place.channel_id), None
        else:
            turn = await _own_or_moderated(s, turn_id, who, moderator, "regenerate")
            gs = await sessions.session_by_id(s, turn.session_id)
            live = await sessions.live_session(s, gs.channel_id)
            if live is None or live.id != gs.id:
                raise GameEnded()
        # the take's message: its status message, edited into the post (which may be visible a
        # moment before it is recorded)
        old_message = None if turn is None else turn.posted_message_id or turn.status_message_id
        fresh = await regenerate_latest(s, gs, deps.jobs.enqueue, take=turn)
        position = await deps.jobs.position(s, fresh)
        if who.id != fresh.author_id:
            await deps.record(s, place, who, "regenerate_turn", str(fresh.seq), turn_id=fresh.id, via="button")
        return Regenerated(SessionRef.of(gs), TurnRef.of(fresh), position, old_message)


async def turn_id_of(deps: Deps, place: Place, seq: int, reason: str | None = None,
                     extra_rules: Sequence[RuleSet] = ()) -> int:
    """The id of turn `seq` of the channel's live game, for an action whose `reason` the players see."""
    async with deps.sessions() as s:
        await _reason_allowed(deps, s, place, reason, extra_rules)
        return (await _turn(s, place, seq, None)).id


async def kick(deps: Deps, place: Place, who: Member, player: Member) -> tuple[SessionRef, PlayerView]:
    """Remove a player from the game (PlayerNotInGame if they play no character, checked with the
    game locked): their character is free to join."""
    async with deps.sessions.begin() as s:
        gs = await live_session(s, place.channel_id, lock=True)
        p = await sessions.player_of(s, gs.id, player.id)
        if p is None:
            raise PlayerNotInGame(player.name or "")
        await sessions.leave(s, gs, p)
        await deps.record(s, place, who, "kick", str(player.id), player=player.name, character=p.character_id)
        return SessionRef.of(gs), PlayerView.of(p)
