"""Every refusal of the review page in one JSON shape, the local pages' (localweb.errors):
`{"error": code, "message": text, "problems"?: [{"field", "message"}]}`. An edit's problems name
the field each is about, so the page shows each one next to its field. A 500 is a bug: logged
with its traceback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiohttp import web

from localweb.errors import Refusal, http_refusal, json_error

log = logging.getLogger(__name__)


class ApiError(Refusal):
    def __init__(self, status: int, code: str, message: str, problems: Sequence[dict[str, str]] = ()):
        super().__init__(status, code, message, problems=list(problems) or None)
        self.problems = list(problems)


@web.middleware
async def errors_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except Refusal as e:
        return e.response()
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return http_refusal(e)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return json_error(500, "internal", "The review page failed; its terminal shows why.")
