"""Every refusal of a local page in one JSON shape: `{"error": code, "message": text, ...}`, plus
what a page adds about it (the play page: `field`, `params`; the review page: `problems`).
aiohttp's own refusals (router, body size, methods) get the same shape, with a code per status."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

# aiohttp's refusals by status: the code a page shows.
HTTP_CODES = {
    400: "bad_request", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 408: "timeout",
    413: "too_large", 415: "unsupported_media_type", 416: "range_not_satisfiable",
}
# aiohttp's headers that still mean something on a refusal.
KEPT_HEADERS = ("Allow", "Content-Range")


class Refusal(Exception):
    """A request refused: its status, code and message (rendered with str() when answered, so a
    lazily translated text is worded in the request's language), headers, and the page's extra
    fields (None: left out)."""

    def __init__(self, status: int, code: str, message: object, *, headers: Mapping[str, str] | None = None,
                 **extra: object) -> None:
        super().__init__(message)
        self.status, self.code, self.headers, self.extra = status, code, headers, extra
        self._message = message

    @property
    def message(self) -> str:
        return str(self._message)

    def response(self) -> web.Response:
        return json_error(self.status, self.code, self.message, self.headers, **self.extra)


def json_error(status: int, code: str, message: object, headers: Mapping[str, str] | None = None,
               **extra: object) -> web.Response:
    body: dict[str, object] = {"error": code, "message": str(message)}
    body.update((k, v) for k, v in extra.items() if v is not None)
    return web.json_response(body, status=status, headers=headers)


def http_refusal(e: web.HTTPException, messages: Mapping[int, object] = {}) -> web.Response:  # noqa: B006 (read only)
    """aiohttp's refusal `e` (status 400 and above) in the JSON shape; `messages`: a page's own
    words per status, else aiohttp's reason phrase (English)."""
    headers = {k: v for k, v in e.headers.items() if k in KEPT_HEADERS}
    return json_error(e.status, HTTP_CODES.get(e.status, "refused"), messages.get(e.status) or e.reason, headers)
