"""The bot's metrics (bot.metrics) and their GET /metrics next to /healthz (bot.health): bounded
labels (commands by name, components by family, never an id), the queue gauges from
db.queue_stats, the gateway's shards read at scrape time, and the endpoint on the real bot
against the fake Discord."""

from __future__ import annotations

import math
import types

import aiohttp
import discord
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot import health
from bot.metrics import (
    ACK_BUCKETS,
    BotMetrics,
    component_family,
    gateway_shards,
    interaction_command,
    interaction_kind,
)
from tests.bot.conftest import stop_bot
from tests.queue.helpers import wait_until


def _interaction(kind: str, *, command: str | None = None, custom_id: str | None = None):
    return types.SimpleNamespace(
        type=discord.InteractionType[kind],
        command=types.SimpleNamespace(qualified_name=command) if command else None,
        data={"custom_id": custom_id} if custom_id else {"name": "x"},
    )


def test_labels_name_commands_and_component_families_never_ids():
    assert component_family("ag:cancel:123456789") == "cancel"
    assert component_family("ag:regen:42") == "regenerate"
    assert component_family("ag:vote:7") == "vote"
    assert component_family("ag:privacy:delete:987654321") == "privacy_delete"
    assert component_family("ag:something:new:1") == "other"
    assert component_family("5f1c2e0c0d4b4a7c8d1e") == "other"  # a View's generated id
    assert component_family(None) == "other"

    assert interaction_kind(_interaction("application_command")) == "command"
    assert interaction_kind(_interaction("autocomplete")) == "autocomplete"
    assert interaction_kind(_interaction("component")) == "component"
    assert interaction_kind(_interaction("modal_submit")) == "modal"
    assert interaction_kind(_interaction("ping")) is None

    assert interaction_command(_interaction("application_command", command="game start")) == "game start"
    assert interaction_command(_interaction("autocomplete", command="act")) == "act"
    assert interaction_command(_interaction("application_command")) == "unknown"  # not in the tree
    assert interaction_command(_interaction("component", custom_id="ag:cancel:99")) == "cancel"
    assert interaction_command(_interaction("modal_submit", custom_id="0123abcd")) == "other"


def test_interactions_and_acks_are_counted_by_bounded_labels():
    m = BotMetrics(version="1.2.3")
    m.interaction("command", "act", "ok")
    m.interaction("command", "act", "refused")
    m.interaction("component", "cancel", "error")
    for seconds in (0.003, 0.02, 0.4):
        m.acknowledged("command", seconds)
    get = m.registry.get_sample_value
    assert get("animegamer_bot_interactions_total", {"kind": "command", "command": "act", "outcome": "ok"}) == 1
    assert get("animegamer_bot_interactions_total", {"kind": "component", "command": "cancel", "outcome": "error"}) == 1
    assert get("animegamer_bot_ack_seconds_bucket", {"kind": "command", "le": "0.005"}) == 1
    assert get("animegamer_bot_ack_seconds_bucket", {"kind": "command", "le": "0.1"}) == 2
    assert get("animegamer_bot_ack_seconds_count", {"kind": "command"}) == 3
    assert ACK_BUCKETS[:5] == (0.005, 0.01, 0.025, 0.05, 0.1)  # fine below 100 ms
    assert get("animegamer_bot_info", {"version": "1.2.3"}) == 1
    with pytest.raises(ValueError):
        m.interaction("slash", "act", "ok")
    with pytest.raises(ValueError):
        m.interaction("command", "act", "maybe")

    m.posted(2.0)
    m.edit_waited(0.3)
    m.post_retries.inc()
    m.post_giveups.inc()
    m.cache(hit=True)
    m.cache(hit=True)
    m.cache(hit=False)
    assert get("animegamer_bot_post_lag_seconds_count") == 1
    assert get("animegamer_bot_edit_wait_seconds_sum") == pytest.approx(0.3)
    assert get("animegamer_bot_post_retries_total") == 1 and get("animegamer_bot_post_giveups_total") == 1
    assert get("animegamer_bot_config_cache_requests_total", {"result": "hit"}) == 2
    assert get("animegamer_bot_config_cache_requests_total", {"result": "miss"}) == 1
    pending = {"n": 4}
    m.watch_edit_queue(lambda: pending["n"])
    assert get("animegamer_bot_edit_queue_depth") == 4
    m.set_database_up(False)
    assert get("animegamer_database_up") == 0


def test_queue_gauges_drop_to_zero_when_a_film_drains():
    m = BotMetrics()
    get = m.registry.get_sample_value
    m.set_queue({}, films=["qiqi", "ponyo"])  # the configured films read 0 from the start
    assert get("animegamer_queue_depth", {"film": "qiqi"}) == 0
    m.set_queue({"qiqi": (3, 125.0)})
    assert get("animegamer_queue_depth", {"film": "qiqi"}) == 3
    assert get("animegamer_queue_oldest_seconds", {"film": "qiqi"}) == 125.0
    m.set_queue({})
    assert get("animegamer_queue_depth", {"film": "qiqi"}) == 0
    assert get("animegamer_queue_oldest_seconds", {"film": "qiqi"}) == 0
    assert get("animegamer_queue_depth", {"film": "ponyo"}) == 0


class _Shard:
    def __init__(self, latency: float, closed: bool) -> None:
        self.latency, self._closed = latency, closed

    def is_closed(self) -> bool:
        return self._closed


class _Client:
    """What gateway_shards reads of a discord.py client: a plain one, or a sharded one (`shards`)."""

    def __init__(self, *, shards=None, latency=0.05, ready=True, closed=False, shard_id=None) -> None:
        if shards is not None:
            self.shards = shards
        self.latency, self._ready, self._closed, self.shard_id = latency, ready, closed, shard_id
        self.ws = types.SimpleNamespace(open=not closed)

    def is_ready(self) -> bool:
        return self._ready

    def is_closed(self) -> bool:
        return self._closed


def test_gateway_shards_of_plain_and_sharded_clients():
    assert gateway_shards(_Client(latency=0.04)) == [(0, 0.04, True)]
    assert gateway_shards(_Client(ready=False, shard_id=3)) == [(3, 0.05, False)]
    assert gateway_shards(_Client(closed=True)) == [(0, 0.05, False)]
    sharded = _Client(shards={5: _Shard(0.2, closed=True), 4: _Shard(0.1, closed=False)})
    assert gateway_shards(sharded) == [(4, 0.1, True), (5, 0.2, False)]


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples}


async def _scrape(port: int) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


async def test_metrics_endpoint_reads_the_shards_at_scrape_time():
    client = _Client(shards={0: _Shard(0.03, closed=False), 1: _Shard(float("inf"), closed=True)})
    client.metrics = BotMetrics()  # type: ignore[attr-defined]
    runner, port = await health.start_server(client, "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        status, ctype, text = await _scrape(port)
        assert status == 200 and ctype.startswith("text/plain")
        s = _samples(text)
        assert s[("animegamer_bot_gateway_connected", frozenset({("shard", "0")}))] == 1
        assert s[("animegamer_bot_gateway_connected", frozenset({("shard", "1")}))] == 0
        assert s[("animegamer_bot_gateway_latency_seconds", frozenset({("shard", "0")}))] == pytest.approx(0.03)
        # Shard 1 has answered no heartbeat yet (inf): no latency sample rather than +Inf.
        assert ("animegamer_bot_gateway_latency_seconds", frozenset({("shard", "1")})) not in s
        client.shards[0] = _Shard(0.09, closed=False)  # read again at the next scrape
        s = _samples((await _scrape(port))[2])
        assert s[("animegamer_bot_gateway_latency_seconds", frozenset({("shard", "0")}))] == pytest.approx(0.09)
        # A bot without metrics (before they are wired): 404, not an empty page.
        del client.metrics  # type: ignore[attr-defined]
        assert (await _scrape(port))[0] == 404
    finally:
        await runner.cleanup()


async def test_the_real_bot_serves_metrics_next_to_healthz(world, start_bot):
    bot = await start_bot(health_address=("127.0.0.1", 0))
    assert bot.health_port
    metrics = getattr(bot, "metrics", None)
    if metrics is None:  # not wired into AnimeGamerBot yet: the endpoint reads bot.metrics when set
        assert (await _scrape(bot.health_port))[0] == 404
        metrics = BotMetrics()
        setattr(bot, "metrics", metrics)  # noqa: B010

    async def connected():
        s = _samples((await _scrape(bot.health_port))[2])
        return s.get(("animegamer_bot_gateway_connected", frozenset({("shard", "0")}))) == 1

    await wait_until(connected, timeout=20)
    status, _, text = await _scrape(bot.health_port)
    assert status == 200
    s = _samples(text)
    latency = s.get(("animegamer_bot_gateway_latency_seconds", frozenset({("shard", "0")})))
    assert latency is None or (math.isfinite(latency) and latency >= 0)
    assert s[("animegamer_database_up", frozenset())] in (0, 1)
    # The gateway goes away: the scrape says so.
    world.server.gateway.refusing = True
    await world.server.gateway.drop()

    async def disconnected():
        s = _samples((await _scrape(bot.health_port))[2])
        return s.get(("animegamer_bot_gateway_connected", frozenset({("shard", "0")}))) == 0

    await wait_until(disconnected, timeout=20)
    world.server.gateway.refusing = False
    await wait_until(connected, timeout=30)
    await stop_bot(world, bot)
