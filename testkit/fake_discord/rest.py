"""The REST API's plumbing: routes declared with @route, request recording, injected faults and
rate-limit headers. The handlers themselves live with their resource (messages.py, ...)."""

from __future__ import annotations

import json
import logging
import mimetypes
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .errors import ApiError
from .models import FakeAttachment, RecordedRequest

if TYPE_CHECKING:  # pragma: no cover
    from .server import FakeDiscord

log = logging.getLogger(__name__)

Reply = tuple[int, Any]  # (HTTP status, JSON body or None)
Handler = Callable[..., Awaitable[Reply]]

_ROUTE_PARAM = re.compile(r"\{(\w+)\}")


def route(method: str, template: str, *, auth: bool = True) -> Callable[[Handler], Handler]:
    """Declare a FakeDiscord method as the handler of METHOD template (relative to /api/v10).

    Stackable. The handler gets the RecordedRequest and the template's {parameters} as strings,
    and returns (status, JSON body or None) or raises ApiError. auth=False: no bot token needed.
    """

    def mark(handler: Handler) -> Handler:
        handler.__dict__.setdefault("fake_routes", []).append((method, template, auth))
        return handler

    return mark


@dataclass
class Route:
    method: str
    template: str
    handler: Handler
    auth: bool
    pattern: re.Pattern[str] = field(init=False)

    def __post_init__(self) -> None:
        escaped = re.escape(self.template).replace(r"\{", "{").replace(r"\}", "}")
        self.pattern = re.compile("^" + _ROUTE_PARAM.sub(lambda m: f"(?P<{m.group(1)}>[^/]+)", escaped) + "$")


def collect_routes(server: object) -> list[Route]:
    """Every @route-marked method of server's class, bound to server."""
    routes = []
    for name in dir(type(server)):
        for method, template, auth in getattr(getattr(type(server), name, None), "fake_routes", ()):
            routes.append(Route(method, template, getattr(server, name), auth))
    # A literal segment wins over a parameter ("/x/@me" before "/x/{id}"): fewest parameters first.
    return sorted(routes, key=lambda r: r.template.count("{"))


@dataclass(eq=False)
class Fault:
    """An injected failure: the next `times` matching requests get this answer instead of a handler's.

    Matches by route template (e.g. "/channels/{channel_id}/messages") or by a regex searched in the
    path. `hits` records the requests it answered, so a test can assert the bot saw them and retried.
    """

    method: str
    route: str | None
    path_re: re.Pattern[str] | None
    status: int
    code: int
    message: str
    times: int
    retry_after: float | None = None
    hits: list[RecordedRequest] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return self.times - len(self.hits)

    def matches(self, rec: RecordedRequest) -> bool:
        if self.remaining <= 0 or self.method != rec.method:
            return False
        if self.route is not None:
            return rec.route == self.route
        return self.path_re is not None and self.path_re.search(rec.path) is not None

    def answer(self) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, body, extra headers). A 429 looks like Discord's: discord.py sleeps retry_after and retries."""
        if self.status != 429:
            return self.status, ApiError(self.status, self.code, self.message).body, {}
        retry_after = 1.0 if self.retry_after is None else self.retry_after
        body = {"message": self.message, "retry_after": retry_after, "global": False, "code": self.code}
        headers = {
            "Retry-After": str(max(1, round(retry_after))),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": f"{retry_after:.3f}",
            "X-RateLimit-Scope": "user",
            # discord.py treats a 429 without Via as a Cloudflare ban and raises instead of retrying.
            "Via": "1.1 google",
        }
        return 429, body, headers


async def read_body(request: web.Request) -> tuple[Any, list[FakeAttachment]]:
    """JSON body, or a multipart body's payload_json and files (files[n] parts)."""
    if request.headers.get("Content-Type", "").startswith("multipart/"):
        payload: Any = None
        files: list[FakeAttachment] = []
        async for part in await request.multipart():
            name = part.name or ""
            raw = await part.read(decode=False)
            if name == "payload_json":
                payload = json.loads(raw.decode())
            elif part.filename is not None or name.startswith("files["):
                # discord.py labels every file application/octet-stream; Discord sniffs the type.
                ctype = mimetypes.guess_type(part.filename or "")[0] or part.headers.get("Content-Type")
                # The id of an upload is its n in files[n], which the `attachments` field refers to.
                n = re.fullmatch(r"files\[(\d+)\]", name)
                files.append(FakeAttachment(id=int(n[1]) if n else len(files), filename=part.filename or name,
                                            data=bytes(raw), content_type=ctype))
        return payload, files
    raw = await request.read()
    if not raw:
        return None, []
    try:
        return json.loads(raw), []
    except ValueError:
        return raw.decode(errors="replace"), []


class RestMixin:
    """FakeDiscord's /api/v10 entry point, and fault injection (test-facing)."""

    def fail_next(
        self: FakeDiscord,
        method: str,
        path_regex: str | None = None,
        *,
        route: str | None = None,
        status: int = 503,
        code: int = 0,
        message: str | None = None,
        times: int = 1,
        retry_after: float | None = None,
    ) -> Fault:
        """Answer the next `times` requests of a route (template) or path (regex) with an error.

        E.g. fail_next("PATCH", route="/channels/{channel_id}/messages/{message_id}", status=429,
        retry_after=0.2, times=2). Mind discord.py's retries: its HTTPClient retries 500/502/504/524
        (sleeping 1 s, 3 s, ...) and a 429 after retry_after (up to 5 tries in all); the interaction
        webhook adapter retries every 5xx and 429 the same way. The default 503 raises at once.
        """
        if (path_regex is None) == (route is None):
            raise ValueError("fail_next needs exactly one of path_regex and route")
        if route is not None and not any(r.template == route for r in self._routes):
            raise ValueError(f"the fake has no route {route!r}")
        fault = Fault(
            method=method.upper(),
            route=route,
            path_re=re.compile(path_regex) if path_regex is not None else None,
            status=status,
            code=code,
            message=message or ("You are being rate limited." if status == 429 else "injected"),
            times=times,
            retry_after=retry_after,
        )
        self.faults.append(fault)
        return fault

    async def _api(self: FakeDiscord, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body, files = await read_body(request)
        matched, params = None, {}
        for candidate in self._routes:
            m = candidate.pattern.match(path) if candidate.method == request.method else None
            if m:
                matched, params = candidate, m.groupdict()
                break
        rec = RecordedRequest(
            method=request.method,
            path=path,
            route=matched.template if matched else None,
            params=params,
            query=dict(request.query),
            json=body,
            files=files,
            headers=dict(request.headers),
        )
        self.requests.append(rec)
        headers = {
            # Generous, never-exhausted buckets: discord.py must not sleep in tests.
            "X-RateLimit-Limit": "50",
            "X-RateLimit-Remaining": "49",
            "X-RateLimit-Reset-After": "1.0",
            "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
            "X-RateLimit-Bucket": f"fake-{matched.template if matched else 'unknown'}",
        }
        fault = next((f for f in self.faults if f.matches(rec)), None)
        try:
            if fault is not None:
                fault.hits.append(rec)
                status, result, extra = fault.answer()
                headers.update(extra)
            elif matched is None:
                self.unhandled.append(rec)
                log.warning("fake discord: unhandled %s %s", request.method, path)
                raise ApiError(404, 0, "404: Not Found")
            elif matched.auth and request.headers.get("Authorization") != f"Bot {self.token}":
                raise ApiError(401, 0, "401: Unauthorized")
            else:
                status, result = await matched.handler(rec, **params)
        except ApiError as e:
            status, result = e.status, e.body
        rec.status, rec.response = status, result
        self._notify()
        if status == 204 or result is None:
            return web.Response(status=204 if status < 300 else status, headers=headers)
        # Exactly "application/json": discord.py's json_or_text compares the header verbatim.
        headers["Content-Type"] = "application/json"
        return web.Response(body=json.dumps(result).encode(), status=status, headers=headers)
