"""The bot's metrics (bot.parts.metrics) and their GET /metrics next to /healthz (bot.parts.health): bounded
labels (commands by name, components by family, never an id), the queue gauges from
db.queue_stats, the gateway's shards read at scrape time, and the endpoint on the real bot
against the fake Discord. And the wiring: interactions counted once per handler with their outcome
and timed to their callback POST (bot.parts.interaction_meter), post lag, retries and give-ups, edit
queue and wait, the config cache, the queue gauges and database_up (bot.parts.queue_watch)."""

from __future__ import annotations

import asyncio
import math
import types

import aiohttp
import discord
import pytest
import yarl
from multidict import CIMultiDict
from prometheus_client.parser import text_string_to_metric_families

from bot.parts import health
from bot.parts.edits import EditScheduler
from bot.parts.interaction_meter import STALE, InteractionMeter, callback_interaction_id
from bot.parts.metrics import (
    ACK_BUCKETS,
    BotMetrics,
    component_family,
    gateway_shards,
    interaction_command,
    interaction_kind,
)
from bot.parts.queue_watch import QueueWatch
from bot.parts.service_args import service_on
from testkit.queue import wait_until
from testkit.waits import Passes, loop_turns
from tests.bot.conftest import stop_bot
from tests.bot.helpers import answer, command, posted_turns, result, say, setup_game, status_message


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
    """What gateway_shards reads of a discord.py AutoShardedClient."""

    def __init__(self, shards, *, ready=True) -> None:
        self.shards, self._ready = shards, ready

    def is_ready(self) -> bool:
        return self._ready


def test_gateway_shards_of_a_sharded_client():
    sharded = _Client({5: _Shard(0.2, closed=True), 4: _Shard(0.1, closed=False)})
    assert gateway_shards(sharded) == [(4, 0.1, True), (5, 0.2, False)]
    assert gateway_shards(_Client({3: _Shard(0.05, closed=False)}, ready=False)) == [(3, 0.05, False)]
    assert gateway_shards(_Client({})) == []


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples}


async def _scrape(port: int) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


async def test_metrics_endpoint_reads_the_shards_at_scrape_time():
    client = _Client(shards={0: _Shard(0.03, closed=False), 1: _Shard(float("inf"), closed=True)})
    nothing = types.SimpleNamespace()  # /metrics reads neither the database nor the notifier
    runner, port = await health.start_server(BotMetrics(), "127.0.0.1", 0, gateway=client, db=nothing, notifier=nothing)  # type: ignore[arg-type]
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
    finally:
        await runner.cleanup()


async def test_the_real_bot_serves_metrics_next_to_healthz(world, start_bot):
    bot = await start_bot(health_address=("127.0.0.1", 0))
    assert bot.health_port
    assert isinstance(bot.metrics, BotMetrics)  # every bot has its own

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


# --- the wiring (phase 2): what the running bot records


def _value(metrics: BotMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def _counted(metrics: BotMetrics, kind: str, command: str, outcome: str) -> float:
    return _value(metrics, "animegamer_bot_interactions_total", kind=kind, command=command, outcome=outcome)


def _fake(kind: str, interaction_id: int, **kw):
    i = _interaction(kind, **kw)
    i.id = interaction_id
    return i


async def _answer(meter: InteractionMeter, interaction_id: int, *, body: bool = True) -> None:
    """What aiohttp's tracing reports while an interaction's callback POST goes out."""
    url = yarl.URL(f"http://discord.test/api/v10/interactions/{interaction_id}/a-token/callback")
    config = meter.trace()
    for callback in config.on_request_headers_sent:
        await callback(None, None, aiohttp.TraceRequestHeadersSentParams("POST", url, CIMultiDict()))  # type: ignore[arg-type]
    if body:
        for callback in config.on_request_chunk_sent:
            await callback(None, None, aiohttp.TraceRequestChunkSentParams("POST", url, b"{}"))  # type: ignore[arg-type]


async def _ended(coro) -> None:
    """Run `coro` as a task (as discord.py runs a handler) until the task's done callbacks ran."""
    await asyncio.create_task(coro)
    await loop_turns()  # the meter's done callback runs after this coroutine's wake-up


async def test_an_interaction_counts_once_when_the_task_that_answered_it_ends():
    m = BotMetrics()
    meter = InteractionMeter(m)

    async def handled(interaction, *steps) -> None:
        async def handler():
            for step in steps:
                if step == "answer":
                    await _answer(meter, interaction.id)
                else:  # bot.answers.replies.report's verdict
                    meter.outcome(interaction, step)
            assert not _counted(m, *labels)  # nothing counted while the handler runs

        labels = (str(interaction_kind(interaction)), interaction_command(interaction),
                  next((s for s in steps if s != "answer"), "ok"))
        meter.received(interaction)
        await _ended(handler())
        assert _counted(m, *labels) == 1

    await handled(_fake("application_command", 1, command="act"), "answer")
    await handled(_fake("application_command", 2, command="act"), "refused", "answer")  # a check refused it
    # A button defers, then fails: one interaction, counted as the error only.
    await handled(_fake("component", 3, custom_id="ag:cancel:9"), "answer", "error")
    assert not _counted(m, "component", "cancel", "ok")
    await handled(_fake("autocomplete", 4, command="act"), "answer")
    assert _value(m, "animegamer_bot_ack_seconds_count", kind="command") == 2
    assert _value(m, "animegamer_bot_ack_seconds_count", kind="component") == 1
    assert _value(m, "animegamer_bot_ack_seconds_count", kind="autocomplete") == 1
    assert len(meter) == 0  # every finished interaction forgotten

    # An answer with no body is acknowledged by its headers; the answer is timed once however often it is retried.
    meter.received(_fake("application_command", 5, command="games"))
    await _ended(_answer(meter, 5, body=False))
    assert _value(m, "animegamer_bot_ack_seconds_count", kind="command") == 3
    meter.received(_fake("application_command", 6, command="games"))

    async def answered_twice():
        await _answer(meter, 6)
        await _answer(meter, 6)

    await _ended(answered_twice())
    assert _value(m, "animegamer_bot_ack_seconds_count", kind="command") == 4
    assert _counted(m, "command", "games", "ok") == 2

    # Neither answered nor reported: not counted, and forgotten once stale.
    meter.received(_fake("modal_submit", 7, custom_id="x"))
    meter.received(_fake("ping", 8))  # not a member's interaction: not tracked
    assert len(meter) == 1
    meter._tracked[7].received -= STALE + 1
    meter.received(_fake("application_command", 9, command="games"))
    assert 7 not in meter._tracked and len(meter) == 1
    # A report for an interaction the meter does not hold counts at once.
    meter.outcome(_fake("component", 10, custom_id="ag:vote:1"), "refused")
    assert _counted(m, "component", "vote", "refused") == 1


def test_only_an_interactions_callback_is_its_answer():
    assert callback_interaction_id("POST", yarl.URL("http://x/api/v10/interactions/123/tok_en.x/callback")) == 123
    assert callback_interaction_id("POST", yarl.URL("http://x/api/v10/interactions/123/tok/callback?with_response=true")) == 123
    assert callback_interaction_id("GET", yarl.URL("http://x/api/v10/interactions/123/tok/callback")) is None
    assert callback_interaction_id("POST", yarl.URL("http://x/api/v10/webhooks/1/tok")) is None  # a follow-up
    assert callback_interaction_id("PATCH", yarl.URL("http://x/api/v10/webhooks/1/tok/messages/@original")) is None


async def test_the_bot_counts_commands_refusals_errors_and_buttons_and_times_each_answer(world, start_bot):
    w, server = world, world.server
    bot = await start_bot()
    m = bot.metrics
    handles = []

    async def run(member, name: str, options: dict | None = None) -> str:
        h, _ = await command(w, member, name, options)
        handles.append(h)
        return (await answer(h))[0]

    assert "Qiqi" in await run(w.erin, "admin film", {"film": "qiqi"})
    assert "has started" in await run(w.alice, "game start")
    assert "You play Qiqi" in await run(w.alice, "game join", {"character": "qiqi"})
    assert "have not joined" in await run(w.carol, "act", {"motion": "run", "background": "town"})
    assert "is queued" in await run(w.alice, "act", {"motion": "walk", "background": "town"})
    ac = await server.autocomplete(w.guild, w.games, w.alice, "act", {"motion": "fly"}, focused="motion")
    await ac.wait_response()
    handles.append(ac)
    position = bot.queue.position

    async def broken(s, turn):
        raise KeyError("a bug")

    bot.queue.position = broken  # type: ignore[method-assign]  # /queue fails after deferring
    try:
        assert "Something went wrong on our side" in await run(w.alice, "queue")
    finally:
        bot.queue.position = position  # type: ignore[method-assign]
    msg = status_message(w, 1)
    cancel = next(c for c in msg.custom_ids if c.startswith("ag:cancel:"))
    for member, expected in ((w.bob, "Only alice"), (w.alice, "is cancelled")):
        h = await server.click(msg, member, cancel)
        handles.append(h)
        assert expected in (await answer(h))[0]

    expected = {
        ("command", "admin film", "ok"): 1, ("command", "game start", "ok"): 1, ("command", "game join", "ok"): 1,
        ("command", "act", "refused"): 1, ("command", "act", "ok"): 1, ("command", "queue", "error"): 1,
        ("autocomplete", "act", "ok"): 1, ("component", "cancel", "refused"): 1, ("component", "cancel", "ok"): 1,
    }

    async def all_counted():  # an outcome counts once its handler's task has ended, just after the answer
        return all(_counted(m, *labels) == n for labels, n in expected.items())

    await wait_until(all_counted, timeout=5)
    counted = {(s.labels["kind"], s.labels["command"], s.labels["outcome"]): s.value
               for f in m.registry.collect() if f.name == "animegamer_bot_interactions" for s in f.samples
               if s.name.endswith("_total")}
    assert counted == expected  # nothing else, nothing twice (the button that deferred and refused)
    # One acknowledgement per interaction, each shorter than the fake Discord saw it (it pushed the
    # interaction before the bot received it, and got the answer after the bot sent it).
    for kind, n in (("command", 6), ("autocomplete", 1), ("component", 2)):
        assert _value(m, "animegamer_bot_ack_seconds_count", kind=kind) == n, kind
    acks = sum(_value(m, "animegamer_bot_ack_seconds_sum", kind=k) for k in ("command", "autocomplete", "component"))
    seen = sum(h.response.delay for h in handles)
    assert 0 < acks <= seen
    assert len(bot.interaction_meter) == 0


async def test_a_posted_turn_records_its_lag_the_edits_waits_the_queue_and_the_cache(world, start_bot, start_worker, sessions):
    w, server = world, world.server
    bot = await start_bot()
    m = bot.metrics
    await setup_game(w)
    assert "is queued" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    # The queue gauges, from the database (the bot refreshes them every 15 s; here at once).
    assert await bot.queue_watch.refresh()
    assert _value(m, "animegamer_queue_depth", film="qiqi") == 1
    assert 0 <= _value(m, "animegamer_queue_oldest_seconds", film="qiqi") < 60
    assert m.registry.get_sample_value("animegamer_queue_depth", {"film": "ponyo"}) == 0  # every film has a series
    assert _value(m, "animegamer_database_up") == 1

    await start_worker(films=["qiqi"], backend_options={"delay": 0.3})
    await result(w, 1)
    await posted_turns(sessions, 1)
    assert _value(m, "animegamer_bot_post_lag_seconds_count") == 1
    assert 0 <= _value(m, "animegamer_bot_post_lag_seconds_sum") < 10
    assert _value(m, "animegamer_bot_post_retries_total") == 0 and _value(m, "animegamer_bot_post_giveups_total") == 0
    # The status message's edits (queued, progress, the post) went through the edit scheduler.
    assert _value(m, "animegamer_bot_edit_wait_seconds_count") >= 1
    await wait_until(lambda: _async(bot.edits.pending_count() == 0), timeout=10)
    assert _value(m, "animegamer_bot_edit_queue_depth") == 0
    assert await bot.queue_watch.refresh()
    assert _value(m, "animegamer_queue_depth", film="qiqi") == 0 and _value(m, "animegamer_queue_oldest_seconds", film="qiqi") == 0

    # The config cache: each lookup a hit or a miss, a miss being a database load.
    def lookups() -> tuple[float, float]:
        return (_value(m, "animegamer_bot_config_cache_requests_total", result="hit"),
                _value(m, "animegamer_bot_config_cache_requests_total", result="miss"))

    async def autocomplete() -> None:
        ac = await server.autocomplete(w.guild, w.games, w.alice, "act", {"motion": "fly"}, focused="motion")
        await ac.wait_response()

    assert lookups()[1] == bot.config.loads > 0
    await autocomplete()  # loads what it needs
    hits, misses = lookups()
    await autocomplete()
    assert lookups()[0] > hits and lookups()[1] == misses == bot.config.loads  # warm: hits only


async def _async(value):
    return value


async def test_posting_retries_and_give_ups_are_counted(world, start_bot, start_worker, sessions):
    w, server = world, world.server
    bot = await start_bot(post_retry_delays=(0.2,))
    m = bot.metrics
    await setup_game(w)
    assert "is queued" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    # Discord refuses every edit of the turn's message (503: discord.py does not retry it itself).
    server.fail_next("PATCH", rf"^/channels/{w.games.id}/messages/{status_message(w, 1).id}$", status=503, times=1000)
    await start_worker(films=["qiqi"], backend_options={"delay": 0.1})

    async def given_up():
        return _value(m, "animegamer_bot_post_giveups_total") == 1

    await wait_until(given_up, timeout=30)
    assert _value(m, "animegamer_bot_post_retries_total") == 1  # one retry, then the last try failed
    assert _value(m, "animegamer_bot_post_lag_seconds_count") == 0  # never posted


class _Stuck:
    """A channel whose message edits wait for `release`."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.edited: list[int] = []

    def get_partial_message(self, message_id: int):
        async def edit(**fields):
            await self.release.wait()
            self.edited.append(message_id)

        return types.SimpleNamespace(edit=edit)


async def test_edit_queue_depth_and_wait():
    m = BotMetrics()
    channel = _Stuck()
    client = types.SimpleNamespace(get_channel=lambda cid: None, get_partial_messageable=lambda cid, guild_id=None: channel,
                                   allowed_mentions=None)
    edits = EditScheduler(client, m, limit=100, per=0.01)  # type: ignore[arg-type]
    m.watch_edit_queue(edits.pending_count)
    for message_id in (1, 2, 3):
        edits.routine(7, message_id, content="x")
    edits.routine(8, 4, content="y")
    edits.routine(7, 3, content="z")  # replaces the waiting edit of message 3: still one
    await wait_until(lambda: _async(_value(m, "animegamer_bot_edit_wait_seconds_count") == 2), timeout=5)
    # One edit per channel is on its way (it left the queue: its wait is observed), the rest wait.
    assert edits.pending_count() == 2 and _value(m, "animegamer_bot_edit_queue_depth") == 2
    assert _value(m, "animegamer_bot_edit_wait_seconds_count") == 2
    channel.release.set()
    await wait_until(lambda: _async(len(channel.edited) == 4), timeout=5)
    assert _value(m, "animegamer_bot_edit_queue_depth") == 0
    assert _value(m, "animegamer_bot_edit_wait_seconds_count") == 4
    await edits.close()


async def test_the_queue_gauges_say_when_the_database_is_unreachable():
    m = BotMetrics()

    class Down:
        async def __aenter__(self):
            raise ConnectionRefusedError(111, "Connect call failed")

        async def __aexit__(self, *exc):
            return False

    db = types.SimpleNamespace(sessions=Down)
    watch = QueueWatch(service_on(None, db, None), m, interval=0.01)  # type: ignore[arg-type]
    assert not await watch.refresh()
    assert _value(m, "animegamer_database_up") == 0
    tries = Passes(watch, "refresh")
    watch.start()  # the periodic task keeps trying and stops with close()
    await tries.after(1, timeout=10)  # a second try, after the first failed
    await watch.close()
    assert watch.refreshes == 0
