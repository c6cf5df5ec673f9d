"""The page answers only to itself.

Binding to 127.0.0.1 keeps other machines out, but not the local user's own browser: any web page
they visit can send requests to http://127.0.0.1:8080 (cross-site request forgery), and a page
whose DNS name is re-pointed at 127.0.0.1 reads the answers as its own (DNS rebinding). So:

- `Host` must name this server: the bound address, the `--host` name, or a loopback name
  (localhost, 127.0.0.1, [::1]), with the port the connection came in on. A rebound name fails.
- A request that carries `Origin` (browsers send it on every cross-origin request and every
  POST) must come from that same origin.
- A state-changing request (anything but GET/HEAD) must carry that same-origin `Origin`: a
  browser always sends it, so a request without one is not the page's. Scripts and tools send
  `Origin: http://<host>:<port>` themselves.

Everything else gets 403 in the page's JSON error shape. One exception: GET (or HEAD) /metrics
(play.metrics) answers whatever the `Host`, so that Prometheus can scrape the page by any name or
address it reaches it under (a service name, a published port). It changes nothing and tells only
counts (requests per route, open streams), nothing of the game; every other path keeps the guard. The page sets no CORS headers, so a
cross-origin script can neither read answers nor send a JSON body (which needs a preflight).

Bound beyond loopback (`--host 0.0.0.0` or a LAN address), anyone on the network could play, pause
and reset; so the page then asks every request, whichever address it comes in on, for a token
made at start and printed in the page's URL (`/?token=...`, as Jupyter does). The first request
with `?token=` gets it back as a cookie (HttpOnly, SameSite=Strict), which the page's own fetches
and event stream carry; tools may send `Authorization: Bearer <token>` instead (Prometheus
scraping /metrics, too). Without it: 403 in the same JSON error shape. Bound to loopback, no token.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets

from aiohttp import web
from yarl import URL

from i18n import _
from play.errors import ApiError
from play.metrics import METRICS_PATH
from play.services import services

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD"})


def _forbidden(message: str) -> ApiError:
    return ApiError(403, "forbidden", message)


def _host_port(authority: str) -> tuple[str, int | None] | None:
    """`name:port` or `[v6]:port` -> (lower-case name without brackets, port); None if malformed."""
    try:
        url = URL(f"http://{authority}")
    except ValueError:
        return None
    if url.host is None or url.user is not None or url.path not in ("", "/") or url.query_string:
        return None
    return url.host.lower().strip("[]").rstrip("."), url.explicit_port or 80


def _is_wildcard(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def allowed_host(request: web.Request) -> str | None:
    """The request's `Host` if it names this server (as `name:port`), else None."""
    parsed = _host_port(request.headers.get("Host", ""))
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    if parsed is None or not sock:
        return None
    name, port = parsed
    local_ip, local_port = sock[0], sock[1]
    if port != local_port:
        return None
    bound = services(request).host.lower().strip("[]")
    names = LOOPBACK_NAMES | {local_ip.lower(), bound}
    # Served on every interface (the user asked for it): any address of this machine, written as
    # an address, is this server. A DNS name is not: that is what rebinding uses.
    if name in names or (_is_wildcard(bound) and _is_ip(name)):
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


@web.middleware
async def same_origin_middleware(request: web.Request, handler):
    if request.path == METRICS_PATH and request.method in SAFE_METHODS:  # a scrape (see above)
        return await handler(request)
    host = allowed_host(request)
    if host is None:
        raise _forbidden(_("This page answers only to its own address (the Host header names another site)."))
    origin = request.headers.get("Origin")
    if origin is not None and not same_origin(origin, host):
        raise _forbidden(_("Requests from other sites are refused."))
    if origin is None and request.method not in SAFE_METHODS:
        raise _forbidden(_("A request that changes the game must come from the play page (an Origin header naming it)."))
    return await handler(request)


# --- the token, when bound beyond loopback ---------------------------------------------------------

ACCESS_TOKEN = web.AppKey("access_token", str)  # set only when the page needs one (needs_token)
TOKEN_PARAM = "token"


def needs_token(bound: str) -> bool:
    """Whether the page bound to `bound` asks for a token: any address but a loopback one (a DNS
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


def _cookie_name(request: web.Request) -> str:
    # Cookies ignore ports: one per port, so two pages on one machine keep their own tokens.
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    return f"animegamer-play-token-{sock[1] if sock else 0}"


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
        raise ApiError(403, "token_required", _("This page is served beyond this machine and needs its token: open it "
                                                "with the link `animegamer play` printed (it ends in ?token=...)."))
    response = await handler(request)
    name = _cookie_name(request)
    if TOKEN_PARAM in request.query and request.cookies.get(name) != token and not response.prepared:
        response.set_cookie(name, token, httponly=True, samesite="Strict", path="/")
    return response
