"""Players' actions: start a game, join it, leave it, act (a direct turn)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from db import sessions
from db.models import GameSession, Player
from game.catalogue import Film, session_film
from game.content_rules import RuleSet
from game.errors import FilmFixed, NoFilm
from game.film import Character
from game.instruction import Instruction
from game.session_errors import AlreadyJoined, CharacterTaken, SessionExists, UnknownCharacter
from service import refusals
from service.configs import config, film_or_error
from service.deps import Deps, Member, Place
from service.results import PlayerView, SessionRef, TurnRef
from service.shares import check_quota
from service.turn_queue import Authored, submit_turn


@dataclass(frozen=True)
class ActFields:
    """An instruction as a player typed it: the four fields and the other characters in the shot."""

    motion: str
    background: str
    adverb: str = ""
    time_of_day: str = ""
    others: Sequence[str] = field(default_factory=tuple)

    def typed(self) -> list[str]:
        return [self.motion, self.background, self.adverb, self.time_of_day]


@dataclass(frozen=True)
class Started:
    session_id: int
    film: Film
    name: str  # the starter's name as posts show it


@dataclass(frozen=True)
class Joined:
    """A join or a leave: the game, its film, and the player (as they were, for a leave)."""

    session: SessionRef
    film: Film
    player: PlayerView


@dataclass(frozen=True)
class Acted:
    film: Film
    turn: TurnRef
    position: int | None  # in the film's queue (None: no job)
    instruction: Instruction


async def start(deps: Deps, place: Place, who: Member, film: str | None = None, *, admin: bool = False,
                extra_rules: Sequence[RuleSet] = ()) -> Started:
    """A game of the configured film, or of `film` (another one only for an admin); refused where
    the channel has one (SessionExists: there is no row to lock yet, so a start racing this one
    is refused by db.sessions.start_session's unique index)."""
    async with deps.sessions.begin() as s:
        cfg = await config(deps, s, place)
        chosen = film_or_error(film) if film else cfg.film
        if chosen is None:
            raise NoFilm()
        if (cfg.film is None or chosen.id != cfg.film.id) and not admin:
            raise FilmFixed(cfg.film.title_in()) if cfg.film else NoFilm()
        if await sessions.live_session(s, place.channel_id) is not None:
            raise SessionExists()
        gs = await sessions.start_session(s, place.guild_id, place.channel_id, chosen, who.id)
    return Started(gs.id, chosen, cfg.name_to_show(who.name or "", extra_rules))


async def join(deps: Deps, place: Place, who: Member, character: str, extra_rules: Sequence[RuleSet] = ()) -> Joined:
    """Play a free character of the channel's cast: with the game locked, refused for a character
    not in the cast, for a member who plays one already and for a character someone plays."""
    async with deps.sessions.begin() as s:
        gs = await refusals.live_session(s, place.channel_id, lock=True)
        film = session_film(gs.film_id)
        cfg = await config(deps, s, place)
        cast = cfg.cast_for(film)
        ch = film.character(character)
        if ch is None or ch not in cast:
            raise UnknownCharacter(character, [film.character_name_in(c.id) for c in cast])
        await _require_free(s, gs, film, who.id, ch)
        p = await sessions.join(s, gs, film, who.id, cfg.name_to_show(who.name or "", extra_rules), ch.id)
    return Joined(SessionRef.of(gs), film, PlayerView.of(p))


async def leave(deps: Deps, place: Place, user_id: int) -> Joined:
    """Stop playing (NotJoined for a member who plays no character); returns the player as they were."""
    async with deps.sessions.begin() as s:
        gs = await refusals.live_session(s, place.channel_id, lock=True)
        p = await sessions.leave(s, gs, await refusals.player(s, gs, user_id))
    return Joined(SessionRef.of(gs), session_film(gs.film_id), PlayerView.of(p))


async def _require_free(s: AsyncSession, gs: GameSession, film: Film, user_id: int, ch: Character) -> None:
    """AlreadyJoined for a member who plays a character of `gs`, CharacterTaken for `ch` played by
    another; the caller holds the game's lock (db.sessions.join still refuses a join racing past)."""
    mine = await sessions.player_of(s, gs.id, user_id)
    if mine is not None:
        playing = film.character(mine.character_id)
        raise AlreadyJoined(playing.name if playing else mine.character_id)
    taken = await sessions.player_of_character(s, gs.id, ch.id)
    if taken is not None:
        raise CharacterTaken(ch.name, taken.user_name)


async def act(deps: Deps, place: Place, who: Member, fields: ActFields, extra_rules: Sequence[RuleSet] = ()) -> Acted:
    """A turn: the player's character and the `others` in the shot. With the game locked, refused
    when it is paused, in vote mode, for a member who has not joined, and by the content rules
    before the quotas (service.shares), the backlog and the cooldown (service.turn_queue)."""
    async with deps.sessions.begin() as s:
        gs = await refusals.live_session(s, place.channel_id)  # locked and checked by submit_turn
        cfg = await config(deps, s, place)

        async def compose(me: Player) -> Authored:
            # The film after the checks: a paused game whose film was withdrawn is refused as paused.
            ins = cfg.instruction(session_film(gs.film_id), [me.character_id, *fields.others], fields.motion,
                                  fields.background, fields.adverb, fields.time_of_day, extra_rules=extra_rules)
            name = cfg.name_to_show(who.name, extra_rules) if who.name is not None else me.user_name
            await check_quota(deps, s, place, who)
            return Authored(name, ins)

        turn, made = await submit_turn(s, gs, who.id, compose, limits=cfg.limits, enqueue=deps.jobs.enqueue)
        position = await deps.jobs.position(s, turn)
        return Acted(session_film(gs.film_id), TurnRef.of(turn), position, made.instruction)
