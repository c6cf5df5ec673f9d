"""Vote mode's actions (the rules are db/votes.py): propose, open a round, vote, close the due
rounds, and an admin turning the mode on or off; and a round's message, as a face shows it: what
it shows, the message's id, and when it showed the round's result."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from db import sessions, votes
from db.models import Turn, VoteRound
from db.turn_reads import get_turn
from game.catalogue import Film, display_film, session_film
from game.content_rules import RuleSet
from game.instruction import Instruction
from game.sanitize import InputRefused
from i18n import L_
from service.game import Game, Member, Place
from service.players import ActFields, config, shown_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Proposed:
    round: VoteRound
    option: int  # the proposal's number in the round
    film: Film
    instruction: Instruction


@dataclass(frozen=True)
class Shown:
    """What a round's message shows: the round with its proposals and votes, and its game's film
    (a withdrawn film's stand-in)."""

    view: votes.RoundView
    film: Film


@dataclass(frozen=True)
class Closed:
    round: VoteRound
    turn: Turn | None  # the winner's turn
    position: int | None


async def propose(game: Game, place: Place, who: Member, fields: ActFields, extra_rules: Sequence[RuleSet] = ()) -> Proposed:
    """A proposal for the open round (opening one): the proposer's character, if they joined, and
    the `others`. A member playing no character gives a name to be shown by."""
    async with game.sessions.begin() as s:
        gs = await sessions.require_session(s, place.channel_id, active=True)
        film = session_film(gs.film_id)
        cfg = await config(game, s, place)
        me = await sessions.player_of(s, gs.id, who.id)
        if who.name is None and me is None:
            raise InputRefused("name", L_("is empty; please type something"))
        name = shown_name(cfg, who, extra_rules) if who.name is not None else me.user_name if me else ""
        ins = cfg.instruction(film, votes.shot_characters(me.character_id if me else None, list(fields.others)),
                              fields.motion, fields.background, fields.adverb, fields.time_of_day, extra_rules=extra_rules)
        rnd, option, _created = await votes.propose(s, gs, author_id=who.id, author_name=name, instruction=ins)
    return Proposed(rnd, option, film, ins)


async def open_round(game: Game, place: Place, user_id: int) -> tuple[VoteRound, bool]:
    """The open round, or a new one (True)."""
    async with game.sessions.begin() as s:
        gs = await sessions.require_session(s, place.channel_id, active=True)
        return await votes.open_round(s, gs, by=user_id)


async def vote(game: Game, proposal_id: int, user_id: int) -> tuple[VoteRound, int]:
    """A vote for a proposal (a second one moves the first); returns its round and option number."""
    async with game.sessions.begin() as s:
        return await votes.vote(s, proposal_id, user_id)


async def vote_for_option(game: Game, place: Place, option: int, user_id: int) -> tuple[VoteRound, int]:
    """A vote for option `option` of the channel's open round."""
    async with game.sessions.begin() as s:
        gs = await sessions.require_session(s, place.channel_id)
        return await votes.vote_by_number(s, gs, option, user_id)


async def close_due(game: Game, guild_ids: Collection[int], *, shown: bool = False) -> list[Closed]:
    """Close the due rounds of `guild_ids`, each in its own transaction: a round that fails to
    close stays open and the next check tries again. `shown`: the result is read from the row
    (the page), so it counts as shown at once; else the face marks it when its message shows it."""
    async with game.sessions() as s:
        due = await votes.due_rounds(s, list(guild_ids))
    done: list[Closed] = []
    for round_id in due:
        try:
            async with game.sessions.begin() as s:
                closed = await votes.close_round(s, round_id, game.settings, game.jobs.enqueue)
                if closed is None:
                    continue
                turn = None if closed.turn_id is None else await get_turn(s, closed.turn_id)
                position = None if turn is None else await game.jobs.position(s, turn)
                if shown:
                    await votes.mark_shown(s, round_id)
        except Exception as e:
            log.warning("closing vote round %s failed: %s", round_id, e)
            continue
        done.append(Closed(closed.round, turn, position))
    return done


async def set_mode(game: Game, place: Place, who: Member, enabled: bool,
                   seconds: int | None = None) -> tuple[votes.VoteConfig, list[VoteRound]]:
    """Admins: vote mode on or off (and a round's length); returns the mode and the rounds voided."""
    async with game.sessions.begin() as s:
        cfg, voided = await votes.set_mode(s, place.guild_id, place.channel_id, enabled, seconds)
        await game.record(s, place, who, "vote_mode", "on" if enabled else "off", round_seconds=cfg.round_seconds)
    return cfg, voided


# --- a round's message


async def round_shown(game: Game, round_id: int) -> Shown:
    """What round `round_id`'s message shows now."""
    async with game.sessions() as s:
        v = await votes.view(s, round_id)
        gs = await sessions.session_by_id(s, v.round.session_id)
    return Shown(v, display_film(gs.film_id))


async def set_message(game: Game, round_id: int, message_id: int) -> None:
    """The round's message was posted: later updates edit message `message_id`."""
    async with game.sessions.begin() as s:
        await votes.set_message(s, round_id, message_id)


async def mark_shown(game: Game, round_id: int) -> None:
    """The finished round's message shows its result; until then it is one of the `unshown`."""
    async with game.sessions.begin() as s:
        await votes.mark_shown(s, round_id)


async def unshown(game: Game, guild_ids: Collection[int]) -> list[VoteRound]:
    """The finished rounds of `guild_ids` whose result is not shown yet (a restart in between)."""
    async with game.sessions() as s:
        return await votes.unshown(s, guild_ids)
