"""The review page answers only to itself, by the rules every local page shares (localweb.guard,
the play page's too: docs/play.md, "Hostile input and other origins"); here are its own words
and headers.

- `Host` must name this server (the bound address, a loopback name, or, bound to every
  interface, any address written as an address) with the port the connection came in on: a
  DNS name re-pointed at 127.0.0.1 (rebinding) fails.
- A request carrying `Origin` must come from that same origin, and a request that changes
  something (not GET/HEAD) must carry it: browsers always send it then, so one without it is not
  the page's (cross-site request forgery).
- Bound beyond loopback, every request needs the token printed in the page's URL (`?token=`,
  then an HttpOnly SameSite=Strict cookie the page's fetches carry; tools send
  `Authorization: Bearer <token>`).
- Every answer carries a strict Content-Security-Policy (the page's own scripts, styles and media
  only), no sniffing, no referrer (the token is in the URL), no framing.

Refusals are 403 in the page's JSON error shape (film.review.errors).
"""

from __future__ import annotations

from aiohttp import web

from film.review.errors import ApiError
from localweb import guard

BOUND_HOST = web.AppKey("bound_host", str)  # the address (or name) the page was told to bind

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "media-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
                                "frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}

ORIGIN_REFUSALS = {
    "host": "This page answers only to its own address (the Host header names another site).",
    "origin": "Requests from other sites are refused.",
    "no_origin": "A change must come from the review page (an Origin header naming it).",
}
TOKEN_REFUSAL = ("This page is served beyond this machine and needs its token: open it with "
                 "the link `animegamer film review` printed (it ends in ?token=...).")

same_origin_middleware = guard.origin_guard(lambda request: request.app[BOUND_HOST],
                                            lambda rule: ApiError(403, "forbidden", ORIGIN_REFUSALS[rule]))
token_middleware = guard.token_guard("review", lambda: ApiError(403, "token_required", TOKEN_REFUSAL))


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: every answer (files and errors too) gets the page's headers."""
    for key, value in SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)
