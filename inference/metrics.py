"""The worker's Prometheus endpoint (aiohttp): /metrics and /healthz.

Each worker owns a registry (not the process-global one), so several workers can live in one
process (the play page, tests) without clashing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

log = logging.getLogger(__name__)

# Turns take from well under a second (preview) to minutes (the model on a small GPU).
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 90, 120, 180, 300, 600)


class WorkerMetrics:
    def __init__(self, backend: str) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter("animegamer_turns", "Turns finished by this worker", ["status", "film"], registry=r)
        self.turn_seconds = Histogram(
            "animegamer_turn_seconds", "Time from a worker taking a turn to its result", ["film"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.queue_wait = Histogram(
            "animegamer_turn_queue_wait_seconds", "Time from submission to a worker taking the turn", ["film"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.running = Gauge("animegamer_turns_running", "Turns being generated now", registry=r)
        self.progress = Gauge("animegamer_turn_progress", "Progress (0..1) of the turn in each slot", ["slot"], registry=r)
        self.database_up = Gauge("animegamer_database_up", "1 while this worker reaches its database, 0 while cut off", registry=r)
        self.database_up.set(1)
        self.info = Gauge("animegamer_worker_info", "Worker build", ["backend"], registry=r)
        self.info.labels(backend=backend).set(1)


async def start_server(
    metrics: WorkerMetrics, host: str, port: int, health: Callable[[], dict]
) -> tuple[web.AppRunner, int]:
    """Serve /metrics and /healthz; returns the runner (to clean up) and the bound port
    (port 0 picks a free one). /healthz answers 200 while health()["ok"], else 503."""

    async def metrics_view(request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health_view(request: web.Request) -> web.Response:
        state = health()
        return web.json_response(state, status=200 if state.get("ok") else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/healthz", health_view)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port  # public API (tests/play/test_adapters.py)
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return runner, bound
