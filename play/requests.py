"""The page's request models: every body, query and path parameter a handler reads is parsed
here into a declared pydantic model before the handler runs.

Bodies are JSON objects sent as `application/json` (UTF-8), at most MAX_BODY bytes, read within
BODY_TIMEOUT seconds, nested at most as deep as pydantic's JSON parser allows; they are parsed
strictly (no "false" for false, no 12345.7 for an id, no unknown fields). Query and path values
are text by nature: ids and numbers must be plain decimal digits. Ids are bounded to what the
page and the database hold: a player id fits a JS number exactly, a turn id a bigint, a turn
number an integer column.

A handler declares what it reads with `@accepts(body=..., query=..., path=...)` and gets the
parsed models as keyword arguments; adding a route with a model is the model plus that line.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal, Protocol, TypeVar, overload

from aiohttp import web
from aiohttp.typedefs import Handler
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from contracts.ids import BIGINT_MAX, INT_MAX
from i18n import _
from i18n.formatting import number
from play.errors import ApiError, bad_request, not_found

MAX_BODY = 16 * 1024  # bytes; the largest real body (an /act) is under 1 KB
BODY_TIMEOUT = 10.0  # seconds to send a declared body
MAX_PLAYER_ID = 2**53 - 1  # a JS number stays exact
NAME_MAX = 32  # a player's name on the page
# Any text in a request: a bound on its size, not a game rule. An /act field's cap is
# settings/limits.py's FIELD_MAX (lower), which the game's sanitiser applies with its own words.
TEXT_MAX = 200


# --- field types


class Body(BaseModel):
    """A JSON request body: strict types, no unknown fields."""

    model_config = ConfigDict(strict=True, extra="forbid", str_max_length=TEXT_MAX)


class Query(BaseModel):
    """Query parameters: text, parsed; unknown parameters are ignored (caches, cache-busters)."""

    model_config = ConfigDict(extra="ignore", str_max_length=TEXT_MAX)


_DIGITS = re.compile(r"[0-9]{1,20}")


def _decimal(value: object) -> object:
    """Query and path numbers: plain decimal digits only (no sign, spaces, `_`, `1.0`, `1e3`)."""
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        raise ValueError("must be a whole number written in digits")
    return value


PlayerId = Annotated[int, Field(ge=1, le=MAX_PLAYER_ID)]
QueryPlayerId = Annotated[int, BeforeValidator(_decimal), Field(ge=1, le=MAX_PLAYER_ID)]
QueryTurnId = Annotated[int, BeforeValidator(_decimal), Field(ge=1, le=BIGINT_MAX)]
QuerySeq = Annotated[int, BeforeValidator(_decimal), Field(ge=1, le=INT_MAX)]
ShortText = Annotated[str, Field(max_length=TEXT_MAX)]
Key = Annotated[str, Field(max_length=64)]  # film and character ids or names


# --- bodies


class Empty(Body):
    """Actions with nothing to say (start, reset, regenerate, cancel): `{}`."""


class FilmBody(Body):
    film: Key


class CastBody(Body):
    character: Key
    enabled: bool


class JoinBody(Body):
    player_id: PlayerId
    name: Annotated[str, Field(max_length=NAME_MAX * 4)]  # cleaned and measured by the route
    character: Key


class LeaveBody(Body):
    player_id: PlayerId


class ActBody(Body):
    player_id: PlayerId
    motion: ShortText = ""
    background: ShortText = ""
    adverb: ShortText = ""
    time_of_day: ShortText = ""
    characters: Annotated[list[Key], Field(max_length=16)] = []


class PauseBody(Body):
    paused: bool


# --- queries and paths


class StateQuery(Query):
    player: QueryPlayerId | None = None


class TurnsQuery(Query):
    limit: Annotated[int, BeforeValidator(_decimal), Field(ge=1, le=50)] = 20
    before: QuerySeq | None = None
    pending: Literal["", "0", "1", "true", "false"] = ""

    @property
    def only_pending(self) -> bool:
        return self.pending in ("1", "true")


class SuggestQuery(Query):
    field: Literal["motion", "adverb", "background", "time_of_day"]
    q: Annotated[str, Field(max_length=100)] = ""


class TurnPath(Query):
    turn_id: QueryTurnId


# --- parsing


def _refusal(e: ValidationError, *, query: bool = False) -> ApiError:
    err = e.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "json_invalid":
        # TRANSLATORS: the parser's own words (English) follow in the parentheses.
        return bad_request(_("The request body is not valid JSON (%(problem)s).",
                             problem=err["msg"].removeprefix("Invalid JSON: ")))
    if err["type"] == "model_type":
        return bad_request(_("The request body must be a JSON object."))
    field = loc.split(".")[0] or None
    problem = err["msg"][0].lower() + err["msg"][1:]  # pydantic's words (English)
    if query and loc:
        # TRANSLATORS: a query parameter's name (as sent), then what is wrong with its value (in English).
        return bad_request(_("query parameter %(name)s: %(problem)s.", name=loc, problem=problem), field)
    if loc:
        # TRANSLATORS: a field of the request body (as sent), then what is wrong with its value (in English).
        return bad_request(_("%(name)s: %(problem)s.", name=loc, problem=problem), field)
    return bad_request(f"{problem}.", field)


def _too_large() -> ApiError:
    return ApiError(413, "too_large", _("The request body is too large (at most %(limit)s bytes).", limit=number(MAX_BODY)))


async def read_body(request: web.Request) -> bytes:
    """The raw body: `application/json` in UTF-8, declared size within MAX_BODY, sent in time."""
    if request.content_type != "application/json":
        raise ApiError(415, "unsupported_media_type", _("Send the request body as application/json."))
    charset = request.charset
    if charset is not None and charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
        raise ApiError(415, "unsupported_media_type", _("Send the request body as UTF-8 JSON (charset=utf-8)."))
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise _too_large()
    try:
        async with asyncio.timeout(BODY_TIMEOUT):
            return await request.read()
    except TimeoutError:
        raise ApiError(408, "timeout", _("The request body did not arrive in time.")) from None
    except web.HTTPRequestEntityTooLarge:
        raise _too_large() from None
    except web.RequestPayloadError:  # it does not decode: a broken gzip body, a broken chunk
        raise bad_request(_("The request body could not be read (its Content-Encoding or chunks are broken).")) from None


async def parse_body(request: web.Request, model: type[Body]) -> Body:
    raw = await read_body(request)
    if not raw and model is Empty:
        raw = b"{}"  # an action without data may also send no body at all (still as JSON)
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        raise _refusal(e) from None


def parse_query(request: web.Request, model: type[Query]) -> Query:
    try:
        return model.model_validate(dict(request.query))
    except ValidationError as e:
        raise _refusal(e, query=True) from None


def parse_path(request: web.Request, model: type[Query]) -> Query:
    try:
        return model.model_validate(dict(request.match_info))
    except ValidationError:
        raise not_found() from None  # no such turn (an id no row can have)


_B = TypeVar("_B", bound=Body)
_Q = TypeVar("_Q", bound=Query)
_P = TypeVar("_P", bound=Query)
_B_in = TypeVar("_B_in", bound=Body, contravariant=True)
_Q_in = TypeVar("_Q_in", bound=Query, contravariant=True)
_P_in = TypeVar("_P_in", bound=Query, contravariant=True)


# What `@accepts(...)` takes: a handler with the request and, by name, the models it declared.
class BodyHandler(Protocol[_B_in]):
    def __call__(self, request: web.Request, /, *, body: _B_in) -> Awaitable[web.StreamResponse]: ...


class QueryHandler(Protocol[_Q_in]):
    def __call__(self, request: web.Request, /, *, query: _Q_in) -> Awaitable[web.StreamResponse]: ...


class PathHandler(Protocol[_P_in]):
    def __call__(self, request: web.Request, /, *, path: _P_in) -> Awaitable[web.StreamResponse]: ...


class PathBodyHandler(Protocol[_P_in, _B_in]):
    def __call__(self, request: web.Request, /, *, path: _P_in, body: _B_in) -> Awaitable[web.StreamResponse]: ...


@overload
def accepts(*, body: type[_B]) -> Callable[[BodyHandler[_B]], Handler]: ...
@overload
def accepts(*, query: type[_Q]) -> Callable[[QueryHandler[_Q]], Handler]: ...
@overload
def accepts(*, path: type[_P]) -> Callable[[PathHandler[_P]], Handler]: ...
@overload
def accepts(*, path: type[_P], body: type[_B]) -> Callable[[PathBodyHandler[_P, _B]], Handler]: ...
def accepts(
    *, body: type[Body] | None = None, query: type[Query] | None = None, path: type[Query] | None = None
) -> Callable[[Callable[..., Awaitable[web.StreamResponse]]], Handler]:
    """Parse a handler's inputs into its models; it gets them as `body=`, `query=`, `path=`.
    The result is an aiohttp handler (it takes the request alone); the overloads let the type
    checker see that the handler's parameters are the declared models."""

    def wrap(handler: Callable[..., Awaitable[web.StreamResponse]]) -> Handler:
        @functools.wraps(handler)
        async def run(request: web.Request) -> web.StreamResponse:
            kw: dict[str, BaseModel] = {}
            if path is not None:
                kw["path"] = parse_path(request, path)
            if query is not None:
                kw["query"] = parse_query(request, query)
            if body is not None:
                kw["body"] = await parse_body(request, body)
            return await handler(request, **kw)

        return run

    return wrap
