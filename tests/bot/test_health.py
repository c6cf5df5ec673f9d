"""The bot's GET /healthz: 200 with each part's state while it is connected to Discord, reaches
Postgres and hears its notifications. (The 503 while Postgres is down is proven in
tests/faults/test_outages.py, against a database that really goes away.)"""

from __future__ import annotations

import aiohttp
import pytest

from testkit.queue import wait_until
from tests.bot.conftest import stop_bot


async def _get(port: int) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/healthz") as r:
        return r.status, await r.json()


async def test_healthz_says_what_the_bot_is_connected_to(world, start_bot):
    bot = await start_bot(health_address=("127.0.0.1", 0))
    assert bot.health_port

    async def healthy():
        return (await _get(bot.health_port))[0] == 200

    await wait_until(healthy, timeout=20)
    status, body = await _get(bot.health_port)
    assert body["ok"] is True
    assert {k: body[k] for k in ("gateway", "database", "live_updates")} == {
        "gateway": "connected", "database": "up", "live_updates": "up",
    }
    # A gateway outage: 503 naming the gateway while it lasts, healthy again once the bot is back.
    world.server.gateway.refusing = True
    await world.server.gateway.drop()

    async def gateway_down():
        status, body = await _get(bot.health_port)
        return status == 503 and body["gateway"] == "disconnected" and body["database"] == "up"

    await wait_until(gateway_down, timeout=20)
    world.server.gateway.refusing = False
    await wait_until(healthy, timeout=30)
    port = bot.health_port
    await stop_bot(world, bot)
    with pytest.raises(aiohttp.ClientError):  # closed with the bot
        await _get(port)
