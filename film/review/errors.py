"""Every refusal of the review page in one JSON shape, as the play page answers:
`{"error": code, "message": text, "problems"?: [{"field", "message"}]}`. An edit's problems name
the field each is about, so the page shows each one next to its field. A 500 is a bug: logged
with its traceback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiohttp import web

log = logging.getLogger(__name__)

HTTP_CODES = {400: "bad_request", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
              413: "too_large", 415: "unsupported_media_type", 416: "range_not_satisfiable"}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, problems: Sequence[dict[str, str]] = ()):
        super().__init__(message)
        self.status, self.code, self.message, self.problems = status, code, message, list(problems)


def json_error(status: int, code: str, message: str, problems: Sequence[dict[str, str]] = (),
               headers: dict[str, str] | None = None) -> web.Response:
    body: dict[str, object] = {"error": code, "message": message}
    if problems:
        body["problems"] = list(problems)
    return web.json_response(body, status=status, headers=headers)


@web.middleware
async def errors_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except ApiError as e:
        return json_error(e.status, e.code, e.message, e.problems)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        headers = {k: v for k, v in e.headers.items() if k in ("Allow", "Content-Range")}
        return json_error(e.status, HTTP_CODES.get(e.status, "refused"), e.reason, headers=headers)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return json_error(500, "internal", "The review page failed; its terminal shows why.")
