"""The play page's vote mode: the same rounds as Discord's /vote (service.voting), as JSON.

`add_vote_routes(app)` adds the endpoints and a background task that closes the page's due
rounds (its deadline check, as the bot's scheduler does for Discord's guilds). Every tab may
propose and vote (one vote per tab, changeable); whoever opens the page is also its admin, so
it may turn the mode on and off.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Annotated

from aiohttp import web
from pydantic import Field

from play.page import ADMIN, PAGE, PLACE, PLAY_GUILD_ID, every, page_of
from play.requests import NAME_MAX, ActBody, Body, PlayerId, StateQuery, accepts
from play.routes import act_fields, player_name
from service import views, voting
from service.deps import Member
from service.voting import RoundView

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0


class ModeBody(Body):
    enabled: bool
    seconds: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = None  # the service checks its own range


class OpenBody(Body):
    player_id: PlayerId


class ProposeBody(ActBody):
    """The /act fields; a player without a character also gives a name."""

    name: Annotated[str, Field(max_length=NAME_MAX * 4)] = ""


class BallotBody(Body):
    player_id: PlayerId
    option: Annotated[int, Field(ge=1, le=1000)]


def round_json(v: RoundView, seconds_left: float) -> dict:
    rnd = v.round
    return {
        "id": rnd.id,
        "status": rnd.status,
        "deadline": rnd.deadline.isoformat(),
        "seconds_left": seconds_left,
        "outcome": v.outcome_text(),  # in the request's language
        "outcome_code": rnd.outcome,  # what the row keeps (game.stored_reasons); null while open
        "turn_id": rnd.turn_id,
        "options": [
            {
                "number": o.number,
                "author_name": o.proposal.author_name,
                "instruction": o.proposal.instruction,
                "votes": o.votes,
                "winner": v.winner is not None and v.winner.number == o.number,
            }
            for o in v.options
        ],
        "voters": v.voters,
        "players": v.players,
        "players_voted": v.players_voted,
        "my_vote": v.my_vote,
    }


@accepts(query=StateQuery)
async def get_vote(request: web.Request, query: StateQuery) -> web.Response:
    """The mode, and the open round (else the latest one, to show how it ended)."""
    mode = await views.latest_round(page_of(request).deps, PLACE, datetime.now(UTC), query.player)
    body = {"enabled": mode.enabled, "round_seconds": mode.round_seconds,
            "round": round_json(mode.round, mode.seconds_left) if mode.round is not None else None}
    return web.json_response(body)


@accepts(body=ModeBody)
async def post_mode(request: web.Request, body: ModeBody) -> web.Response:
    cfg, _ = await voting.set_mode(page_of(request).deps, PLACE, ADMIN, body.enabled, body.seconds)
    return web.json_response({"ok": True, "enabled": cfg.enabled, "round_seconds": cfg.round_seconds})


@accepts(body=OpenBody)
async def post_open(request: web.Request, body: OpenBody) -> web.Response:
    rnd, created = await voting.open_round(page_of(request).deps, PLACE, body.player_id)
    return web.json_response({"ok": True, "round_id": rnd.id, "created": created})


@accepts(body=ProposeBody)
async def post_propose(request: web.Request, body: ProposeBody) -> web.Response:
    """A proposal: the /act fields (a joined player's character is in the shot, plus `characters`);
    a tab that has not joined names itself."""
    who = Member(body.player_id, player_name(body.name) if body.name.strip() else None)
    done = await voting.propose(page_of(request).deps, PLACE, who, act_fields(body))
    return web.json_response({"ok": True, "round_id": done.round.id, "option": done.option,
                              "instruction": done.instruction.text, "notes": list(done.instruction.notes)})


@accepts(body=BallotBody)
async def post_ballot(request: web.Request, body: BallotBody) -> web.Response:
    """One vote per tab and round, for an option number; voting again moves it."""
    rnd, number = await voting.vote_for_option(page_of(request).deps, PLACE, body.option, body.player_id)
    await close_due(request.app)  # the last joined player's vote closes the round at once
    return web.json_response({"ok": True, "round_id": rnd.id, "option": number})


async def close_due(app: web.Application) -> int:
    """Close the page's due rounds (their results are read from the rows); returns how many closed."""
    async with app[_LOCK]:
        return len(await voting.close_due(app[PAGE].deps, [PLAY_GUILD_ID], shown=True))


_LOCK = web.AppKey("vote_close_lock", asyncio.Lock)


def add_vote_routes(app: web.Application) -> None:
    app.router.add_get("/api/vote", get_vote)
    app.router.add_post("/api/vote/mode", post_mode)
    app.router.add_post("/api/vote/open", post_open)
    app.router.add_post("/api/vote/propose", post_propose)
    app.router.add_post("/api/vote/ballot", post_ballot)
    app[_LOCK] = asyncio.Lock()
    app.cleanup_ctx.append(every(CHECK_SECONDS, close_due, "closing the page's vote rounds failed"))  # the deadline check
