"""The play page's Prometheus metrics, on its own registry: requests by route, method and status,
their durations, and the open live-update streams (SSE clients).

- animegamer_play_requests_total{route,method,status}: answered requests. `route` is the matched
  route's canonical template ("/api/turns/{turn_id}", "/static" for static files), never the raw
  path; a request no route matched is "unmatched" (its path is whatever a client sent).
- animegamer_play_request_seconds{route}: from the request reaching the middleware to its handler
  returning. The event stream's route (/api/events) is left out: it lasts as long as a tab is open
  and would drown the others; its clients are counted by animegamer_play_sse_clients.
- animegamer_play_sse_clients: open /api/events streams, read at scrape time (`watch_sse`).

`metrics_middleware(metrics)` goes first in the app's middlewares (outermost), so it sees every
answer, including the JSON errors the inner errors middleware makes; `add_metrics_route(app,
metrics)` mounts GET /metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

METRICS_PATH = "/metrics"  # Prometheus's default; play/guard.py lets a scrape through by any Host
UNMATCHED = "unmatched"
UNTIMED_ROUTES = frozenset({"/api/events"})  # long-lived streams: counted, not timed
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class PlayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "animegamer_play_requests", "Play page requests answered, by route template, method and status",
            ["route", "method", "status"], registry=r,
        )
        self.request_seconds = Histogram(
            "animegamer_play_request_seconds", "Time to answer a play page request, by route template",
            ["route"], buckets=REQUEST_BUCKETS, registry=r,
        )
        self.sse_clients = Gauge("animegamer_play_sse_clients", "Open live-update (SSE) streams", registry=r)

    def watch_sse(self, count: Callable[[], float]) -> None:
        """Read the open streams from `count()` at every scrape (e.g. len(hub.subscribers))."""
        self.sse_clients.set_function(count)

    def observe(self, route: str, method: str, status: int, seconds: float | None) -> None:
        self.requests.labels(route=route, method=method, status=str(status)).inc()
        if seconds is not None and route not in UNTIMED_ROUTES:
            self.request_seconds.labels(route=route).observe(max(0.0, seconds))


def route_template(request: web.Request) -> str:
    """The matched route's canonical path template; "unmatched" when no route matched."""
    match_info = request.match_info
    route = getattr(match_info, "route", None)
    resource = getattr(route, "resource", None) if route is not None else None
    if resource is None or getattr(match_info, "http_exception", None) is not None:
        return UNMATCHED
    return resource.canonical


def metrics_middleware(metrics: PlayMetrics):
    """An aiohttp middleware that counts and times every request into `metrics`. An exception
    that escapes the handler counts as its status (an HTTPException), 499 (the client went away:
the handler was cancelled) or 500, and is re-raised."""

    @web.middleware
    async def middleware(request: web.Request, handler):
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as e:
            status = e.status
            raise
        except asyncio.CancelledError:
            status = 499  # the client went away before the answer (nginx's convention)
            raise
        finally:
            method = request.method if request.method in _METHODS else "other"
            metrics.observe(route_template(request), method, status, time.perf_counter() - started)

    return middleware


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def metrics_handler(metrics: PlayMetrics):
    async def view(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    return view


def add_metrics_route(app: web.Application, metrics: PlayMetrics, path: str = METRICS_PATH) -> None:
    app.router.add_get(path, metrics_handler(metrics))
