"""The bot's /healthz, for a supervisor (Docker's healthcheck, Kubernetes' probes): 200 while the bot
is connected to Discord's gateway, its database answers, and it hears the database's
notifications (the turns it must post); 503 while any of them is not so. Both answers carry each
part's state as JSON, so the cause of a 503 reads off the body.

The same server answers GET /metrics for Prometheus from the bot's own registry (a
bot.parts.metrics.BotMetrics); the gateway's per-shard latency and state are read from the client at
each scrape.

A bot cut off from Postgres or Discord keeps running and catches up when they return (the
notifier sweeps for what it missed); the 503 says it is waiting, it asks for no restart.
"""

from __future__ import annotations

import logging
import math
from typing import Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.parts.metrics import BotMetrics, ShardedGateway, gateway_shards
from service.runtime import Store, answers

log = logging.getLogger(__name__)

CHECK_TIMEOUT = 3.0  # seconds for the database's SELECT 1


class Listening(Protocol):
    @property
    def live(self) -> bool:
        """True while the database's notifications are heard."""
        ...


class Gateway(ShardedGateway, Protocol):
    """The discord client, as far as /healthz and /metrics read it."""

    @property
    def latency(self) -> float: ...

    def is_closed(self) -> bool: ...


def gateway_state(gateway: Gateway) -> str:
    """'connected' while every shard's gateway socket of this process is open after READY."""
    shards = gateway_shards(gateway)
    if gateway.is_closed() or not shards or not all(connected for _, _, connected in shards):
        return "disconnected"
    return "connected"


async def health(gateway: Gateway, db: Store, notifier: Listening) -> dict[str, object]:
    state: dict[str, object] = {
        "gateway": gateway_state(gateway),
        "database": "up" if await answers(db, CHECK_TIMEOUT) else "unreachable",
        "live_updates": "up" if notifier.live else "reconnecting",
    }
    latency = gateway.latency
    state["ok"] = state == {"gateway": "connected", "database": "up", "live_updates": "up"}
    state["gateway_latency_ms"] = round(latency * 1000, 1) if math.isfinite(latency) else None
    return state


async def start_server(metrics: BotMetrics, host: str, port: int, *, gateway: Gateway, db: Store,
                       notifier: Listening) -> tuple[web.AppRunner, int]:
    """Serve GET /healthz (the gateway, the database and the notifier's LISTEN) and GET /metrics
    (`metrics`); returns the runner (to clean up) and the bound port (0: a free one)."""

    async def view(request: web.Request) -> web.Response:
        state = await health(gateway, db, notifier)
        return web.json_response(state, status=200 if state["ok"] else 503)

    async def metrics_view(request: web.Request) -> web.Response:
        metrics.watch_gateway(gateway)  # the shards' latency and state, read as this scrape collects
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", view)
    app.router.add_get("/metrics", metrics_view)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    bound = runner.addresses[0][1] if runner.addresses else port
    log.info("health on http://%s:%d/healthz, metrics on /metrics", host, bound)
    return runner, bound
