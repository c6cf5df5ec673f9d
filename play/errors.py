"""Every answer that is not a success, in one JSON shape (localweb.errors, the local pages'):
`{"error": code, "message": text, "field"?: name, "params"?: values}`, whichever part refused (a request model, the origin guard, aiohttp's router,
a game rule). A 500 is only a bug, and it is logged with its traceback. A game's refusal ends
with the page's hint for what to do next (PAGE_HINTS: its panels and buttons, never the bot's
commands). Messages render in the request's locale (play.language's middleware runs outside this
one). A game's refusal also gives its values apart from the message (`params`: what was typed, a
limit, a wait in seconds; game.errors.GameError.params), for a page that words it its own way.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from game.errors import GameError, InternalError, ServiceDown, new_reference
from game.sanitize import InputRefused
from i18n import L_, Lazy
from localweb.errors import Refusal, http_refusal, json_error
from service.runtime import outage

log = logging.getLogger(__name__)

# The page's own words for aiohttp's refusals (others keep aiohttp's English reason phrase).
HTTP_MESSAGES = {
    404: L_("There is nothing here."),
    405: L_("This address does not take that method."),
    413: L_("The request is too large."),
}

# What the page tells a player to do next after a refusal (game.errors.GameError.hint): its own
# buttons and panels, where the bot names its commands (bot.parts.hints). A refusal the page never
# meets (a bot-only command's) has no hint here.
PAGE_HINTS = {
    "start_game": L_("Start one under Setup."),
    "join_game": L_("Join it under You."),
    "resume": L_("Resume it under Moderate."),
    "choose_film": L_("Choose one under Setup."),
    "enable_character": L_("Enable one under Setup."),
    "leave_first": L_("Leave under You first to switch."),
    "pick_character": L_("Pick a character under You and join."),
    "propose_next": L_("Propose the action below to open the next one."),
    "propose_by_vote": L_("Propose the action below and vote on the round's options."),
    "act_directly": L_("Send the action below. An admin can turn voting on under Setup."),
}


class ApiError(Refusal):
    """A refusal of the request itself (not a game rule): status, code, message, field."""

    def __init__(self, status: int, code: str, message: str | Lazy, field: str | None = None,
                 headers: dict | None = None):
        super().__init__(status, code, message, headers=headers, field=field or None)


def bad_request(message: str | Lazy, field: str | None = None) -> ApiError:
    return ApiError(400, "bad_request", message, field)


def not_found(message: str | Lazy | None = None) -> ApiError:
    return ApiError(404, "not_found", HTTP_MESSAGES[404] if message is None else message)


@web.middleware
async def errors_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except Refusal as e:
        return e.response()
    except GameError as e:
        return json_error(409, e.code, e.shown(PAGE_HINTS), params=dict(e.params))
    except InputRefused as e:
        return json_error(400, "input_refused", str(e), field=e.field_name or None)
    except web.HTTPException as e:
        if e.status < 400:  # redirects and the like pass through
            raise
        return http_refusal(e, HTTP_MESSAGES)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        down_for = outage(e)  # the database went away for a moment (the one classification, for every process)
        if down_for is not None:
            log.warning("%s %s: database unavailable (%s): %s", request.method, request.path, down_for, e)
            down = ServiceDown()
            return json_error(503, down.code, down.message, params=dict(down.params))
        ref = new_reference()
        log.exception("%s %s failed (reference %s)", request.method, request.path, ref)
        bug = InternalError(ref)
        return json_error(500, bug.code, bug.message, params=dict(bug.params))
