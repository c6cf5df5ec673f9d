"""The page answers only to itself, by the rules every local page shares (localweb.guard, which
holds them); here are the page's own words and its one exception.

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

from aiohttp import web

from i18n import L_
from localweb import guard
from play.errors import ApiError
from play.metrics import METRICS_PATH
from play.page import page_of

ORIGIN_REFUSALS = {
    "host": L_("This page answers only to its own address (the Host header names another site)."),
    "origin": L_("Requests from other sites are refused."),
    "no_origin": L_("A request that changes the game must come from the play page (an Origin header naming it)."),
}
TOKEN_REFUSAL = L_("This page is served beyond this machine and needs its token: open it with the link "
                   "`animegamer play` printed (it ends in ?token=...).")


def allowed_host(request: web.Request) -> str | None:
    """The request's `Host` if it names this server (as `name:port`), else None."""
    return guard.allowed_host(request, page_of(request).host)


def _scrape(request: web.Request) -> bool:
    """GET or HEAD /metrics: a scrape, let through by any Host (see above)."""
    return request.path == METRICS_PATH and request.method in guard.SAFE_METHODS


same_origin_middleware = guard.origin_guard(lambda request: page_of(request).host,
                                            lambda rule: ApiError(403, "forbidden", ORIGIN_REFUSALS[rule]), exempt=_scrape)
token_middleware = guard.token_guard("play", lambda: ApiError(403, "token_required", TOKEN_REFUSAL))
