"""The review page answers only to itself, by the play page's rules (docs/play.md, "Hostile input
and other origins"); `film` may not import `play`, so the rules are written again here, small.

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

import hmac
import ipaddress
import secrets

from aiohttp import web
from yarl import URL

from film.review.errors import ApiError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
BOUND_HOST = web.AppKey("bound_host", str)  # the address (or name) the page was told to bind
ACCESS_TOKEN = web.AppKey("access_token", str)  # set only when bound beyond loopback
TOKEN_PARAM = "token"

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "media-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
                                "frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def needs_token(bound: str) -> bool:
    """Whether a page bound to `bound` asks for a token: any address but a loopback one (a DNS
    name other than localhost may resolve to anything)."""
    name = bound.lower().strip("[]")
    if name == "localhost":
        return False
    try:
        return not ipaddress.ip_address(name).is_loopback
    except ValueError:
        return True


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _host_port(authority: str) -> tuple[str, int] | None:
    """`name:port` or `[v6]:port` -> (lower-case name without brackets, port); None if malformed."""
    try:
        url = URL(f"http://{authority}")
    except ValueError:
        return None
    if url.host is None or url.user is not None or url.path not in ("", "/") or url.query_string:
        return None
    return url.host.lower().strip("[]").rstrip("."), url.explicit_port or 80


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _local_port(request: web.Request) -> int | None:
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    return sock[1] if sock else None


def allowed_host(request: web.Request) -> str | None:
    """The request's `Host` if it names this server, else None."""
    parsed = _host_port(request.headers.get("Host", ""))
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    if parsed is None or not sock:
        return None
    name, port = parsed
    if port != sock[1]:
        return None
    bound = request.app[BOUND_HOST].lower().strip("[]")
    bound_ip = _ip(bound)
    wildcard = bound_ip is not None and bound_ip.is_unspecified
    if name in LOOPBACK_NAMES | {str(sock[0]).lower(), bound} or (wildcard and _ip(name) is not None):
        return request.headers["Host"]
    return None


def same_origin(origin: str, host: str) -> bool:
    try:
        o = URL(origin)
    except ValueError:
        return False
    if o.scheme != "http" or o.host is None or o.path not in ("", "/"):
        return False
    return _host_port(host) == _host_port(o.raw_authority)


def _forbidden(code: str, message: str) -> ApiError:
    return ApiError(403, code, message)


@web.middleware
async def same_origin_middleware(request: web.Request, handler):
    host = allowed_host(request)
    if host is None:
        raise _forbidden("forbidden", "This page answers only to its own address (the Host header names another site).")
    origin = request.headers.get("Origin")
    if origin is not None and not same_origin(origin, host):
        raise _forbidden("forbidden", "Requests from other sites are refused.")
    if origin is None and request.method not in SAFE_METHODS:
        raise _forbidden("forbidden", "A change must come from the review page (an Origin header naming it).")
    return await handler(request)


def _cookie_name(request: web.Request) -> str:
    # Cookies ignore ports: one per port, so two pages on one machine keep their own tokens.
    return f"animegamer-review-token-{_local_port(request) or 0}"


def _given_token(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.query.get(TOKEN_PARAM) or request.cookies.get(_cookie_name(request))


@web.middleware
async def token_middleware(request: web.Request, handler):
    token = request.app.get(ACCESS_TOKEN)
    if token is None:
        return await handler(request)
    given = _given_token(request)
    if given is None or not hmac.compare_digest(given.encode(), token.encode()):
        raise _forbidden("token_required", "This page is served beyond this machine and needs its token: open it with "
                                           "the link `animegamer film review` printed (it ends in ?token=...).")
    response = await handler(request)
    name = _cookie_name(request)
    if TOKEN_PARAM in request.query and request.cookies.get(name) != token and not response.prepared:
        response.set_cookie(name, token, httponly=True, samesite="Strict", path="/")
    return response


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: every answer (files and errors too) gets the page's headers."""
    for key, value in SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)
