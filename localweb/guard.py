"""A page served on this machine answers only to itself.

Binding to 127.0.0.1 keeps other machines out, but not the local user's own browser: any web page
they visit can send requests to http://127.0.0.1:<port> (cross-site request forgery), and a page
whose DNS name is re-pointed at 127.0.0.1 reads the answers as its own (DNS rebinding). So
(`origin_guard`):

- `Host` must name this server: the bound address, the name the page was served under, or a
  loopback name (localhost, 127.0.0.1, [::1]), with the port the connection came in on; bound to
  every interface, any address written as an address too. A rebound name fails.
- A request that carries `Origin` (browsers send it on every cross-origin request and every
  POST) must come from that same origin.
- A state-changing request (anything but GET/HEAD) must carry that same-origin `Origin`: a
  browser always sends it, so a request without one is not the page's.

Bound beyond loopback, anyone on the network could reach the page; so it then asks every request
for a token made at start and printed in the page's URL (`?token=...`, as Jupyter does) (`token_guard`).
The first request with `?token=` gets it back as a cookie (HttpOnly, SameSite=Strict), which the
page's own fetches carry; tools may send `Authorization: Bearer <token>` instead.

Each page words its refusals (and raises them in its own error shape): the guards say which rule
failed. The pages set no CORS headers, so a cross-origin script can neither read answers nor send
a JSON body (which needs a preflight).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Callable
from typing import Literal

from aiohttp import web
from aiohttp.typedefs import Handler
from yarl import URL

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
TOKEN_PARAM = "token"
ACCESS_TOKEN = web.AppKey("access_token", str)  # set only when the page needs one (needs_token)

# Which rule a request broke: its Host names another site, its Origin is another site's, or it
# changes something without an Origin.
OriginRule = Literal["host", "origin", "no_origin"]


def host_port(authority: str) -> tuple[str, int] | None:
    """`name:port` or `[v6]:port` -> (lower-case name without brackets, port); None if malformed."""
    try:
        url = URL(f"http://{authority}")
    except ValueError:
        return None
    if url.host is None or url.user is not None or url.path not in ("", "/") or url.query_string:
        return None
    return url.host.lower().strip("[]").rstrip("."), url.explicit_port or 80


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def _is_wildcard(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return False


def _sockname(request: web.Request) -> tuple | None:
    return request.transport.get_extra_info("sockname") if request.transport else None


def allowed_host(request: web.Request, bound: str) -> str | None:
    """The request's `Host` if it names this server, bound to `bound`, else None."""
    parsed = host_port(request.headers.get("Host", ""))
    sock = _sockname(request)
    if parsed is None or not sock:
        return None
    name, port = parsed
    if port != sock[1]:
        return None
    bound = bound.lower().strip("[]")
    # Served on every interface (the user asked for it): any address of this machine, written as
    # an address, is this server. A DNS name is not: that is what rebinding uses.
    if name in LOOPBACK_NAMES | {str(sock[0]).lower(), bound} or (_is_wildcard(bound) and _is_ip(name)):
        return request.headers["Host"]
    return None


def same_origin(origin: str, host: str) -> bool:
    try:
        o = URL(origin)
    except ValueError:
        return False
    if o.scheme != "http" or o.host is None or o.path not in ("", "/"):
        return False
    return host_port(host) == host_port(o.raw_authority)


def broken_rule(request: web.Request, bound: str) -> OriginRule | None:
    """Which of the origin rules the request breaks (None: it is the page's own)."""
    host = allowed_host(request, bound)
    if host is None:
        return "host"
    origin = request.headers.get("Origin")
    if origin is not None and not same_origin(origin, host):
        return "origin"
    if origin is None and request.method not in SAFE_METHODS:
        return "no_origin"
    return None


def origin_guard(bound: Callable[[web.Request], str], refuse: Callable[[OriginRule], Exception],
                 exempt: Callable[[web.Request], bool] = lambda request: False):
    """A middleware raising `refuse(rule)` for a request that breaks an origin rule; `bound(request)`:
    the address or name the page was bound to; `exempt(request)`: passes unchecked."""

    @web.middleware
    async def same_origin_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not exempt(request):
            rule = broken_rule(request, bound(request))
            if rule is not None:
                raise refuse(rule)
        return await handler(request)

    return same_origin_middleware


# --- the token, when bound beyond loopback ---------------------------------------------------------


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


def _cookie_name(request: web.Request, page: str) -> str:
    # Cookies ignore ports: one per port, so two pages on one machine keep their own tokens.
    sock = _sockname(request)
    return f"animegamer-{page}-token-{sock[1] if sock else 0}"


def _given_token(request: web.Request, cookie: str) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.query.get(TOKEN_PARAM) or request.cookies.get(cookie)


def token_guard(page: str, refuse: Callable[[], Exception]):
    """A middleware asking every request for the app's ACCESS_TOKEN (none set: no token asked),
    raising `refuse()` without it; `page` names its cookie (one per page and port)."""

    @web.middleware
    async def token_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        token = request.app.get(ACCESS_TOKEN)
        if token is None:
            return await handler(request)
        name = _cookie_name(request, page)
        given = _given_token(request, name)
        if given is None or not hmac.compare_digest(given.encode(), token.encode()):
            raise refuse()
        response = await handler(request)
        if TOKEN_PARAM in request.query and request.cookies.get(name) != token and not response.prepared:
            response.set_cookie(name, token, httponly=True, samesite="Strict", path="/")
        return response

    return token_middleware

