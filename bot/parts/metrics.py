"""The bot's Prometheus metrics, on its own registry (not the process-global one), so that several
bots can live in one process (tests, benchmarks) without clashing; bot.parts.health serves them at
GET /metrics next to /healthz.

Labels are bounded: an interaction's `command` is the qualified name of a registered slash
command or a fixed family of buttons (`component_family`), never an id; `film` is a configured
film; `shard` a shard id of this bot.

What each metric measures:

- animegamer_bot_interactions_total{kind,command,outcome}: interactions handled. kind: command,
  component, autocomplete, modal; outcome: ok (answered), refused (a game rule or a check said
  no, answered with the reason), error (a bug or an outage; the member saw the error reply, or an autocomplete got no answer).
- animegamer_bot_ack_seconds{kind}: from the interaction reaching the bot to its first response
  (reply, defer, modal, autocomplete choices) being sent. Discord's limit is 3 s.
- animegamer_bot_post_lag_seconds: from a turn's finish (turns.finished_at) to its post sent.
- animegamer_bot_edit_queue_depth: edits waiting in the per-channel edit scheduler (all channels).
- animegamer_bot_edit_wait_seconds: from an edit being queued to it being applied.
- animegamer_bot_post_retries_total / animegamer_bot_post_giveups_total: posting tries that failed
  and were scheduled again / turns given up on after the last try.
- animegamer_bot_gateway_latency_seconds{shard} / animegamer_bot_gateway_connected{shard}: read
  from the discord client at scrape time (`watch_gateway`), one series per shard of this process.
- animegamer_bot_config_cache_requests_total{result}: the config cache's lookups, hit or miss.
- animegamer_database_up: 1 while the bot reaches its database, 0 while cut off (the worker
  exports the same name; the scrape job tells them apart).
- animegamer_queue_depth{film} / animegamer_queue_oldest_seconds{film}: turns waiting for a worker
  per film and the age of the oldest (db.queue_stats.waiting_by_film, set by `set_queue`).
- animegamer_bot_info{version}: 1, labelled with the package version.

Where they are recorded: AnimeGamerBot makes `bot.metrics` (bot/client.py); interactions and their
acknowledgements in bot.parts.interaction_meter (receipt at the client's dispatch, the answer seen in the
HTTP session's trace, refusals and errors from bot.answers.replies.report); post lag, retries and give-ups
in bot.parts.notifier; the edit queue in bot.parts.edits; the cache in bot.parts.config_cache; the queue gauges and
database_up in bot.parts.queue_watch (every 15 s); the gateway at each scrape (bot.parts.health).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

KINDS = ("command", "component", "autocomplete", "modal")
OUTCOMES = ("ok", "refused", "error")
CACHE_RESULTS = ("hit", "miss")

# Acknowledgements should take tens of milliseconds (the goal is p99 <= 100 ms): fine below 100 ms.
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
# A turn's post follows its finish within a second normally, minutes while Discord refuses.
POST_LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
# An edit waits for its channel's budget (5 edits per 5 s): up to seconds in a busy channel.
EDIT_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)

# custom_id prefixes of the bot's persistent components -> their family (the `command` label).
# Anything else (a View's generated ids, an unknown `ag:` id) counts as "other".
COMPONENT_FAMILIES = (
    ("ag:cancel:", "cancel"),
    ("ag:regen:", "regenerate"),
    ("ag:vote:", "vote"),
    ("ag:privacy:delete:", "privacy_delete"),
)
OTHER = "other"
UNKNOWN_COMMAND = "unknown"

# (shard id, latency in seconds or None/inf/nan when unknown, connected)
ShardState = tuple[int | str, float | None, bool]


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("animegamer-discord")
    except PackageNotFoundError:
        return "unknown"


def component_family(custom_id: str | None) -> str:
    """A component's family from its custom_id: "cancel", "regenerate", "vote", "privacy_delete"
    or "other" (never the id itself, which carries turn, proposal and user ids)."""
    for prefix, family in COMPONENT_FAMILIES:
        if custom_id and custom_id.startswith(prefix):
            return family
    return OTHER


_INTERACTION_KINDS = {
    "application_command": "command",
    "component": "component",
    "autocomplete": "autocomplete",
    "modal_submit": "modal",
}


def interaction_kind(interaction: Any) -> str | None:
    """"command", "component", "autocomplete" or "modal"; None for anything else (a ping)."""
    kind = getattr(getattr(interaction, "type", None), "name", None)
    return _INTERACTION_KINDS.get(kind) if isinstance(kind, str) else None


def interaction_command(interaction: Any) -> str:
    """The `command` label: the qualified name of the slash command the tree resolved (commands
    and autocomplete), else the component or modal family from the custom_id."""
    kind = interaction_kind(interaction)
    if kind in ("command", "autocomplete"):
        command = getattr(interaction, "command", None)
        name = getattr(command, "qualified_name", None)
        return name if isinstance(name, str) and name else UNKNOWN_COMMAND
    data = getattr(interaction, "data", None) or {}
    custom_id = data.get("custom_id") if isinstance(data, Mapping) else None
    return component_family(custom_id if isinstance(custom_id, str) else None)


class Shard(Protocol):
    """What the gauges read of one shard (discord.py's ShardInfo)."""

    @property
    def latency(self) -> float: ...

    def is_closed(self) -> bool: ...


class ShardedGateway(Protocol):
    """What the gauges read of the client (discord.py's AutoShardedClient)."""

    @property
    def shards(self) -> Mapping[int, Shard]: ...

    def is_ready(self) -> bool: ...


def gateway_shards(client: ShardedGateway) -> list[ShardState]:
    """Each of the client's shards: (id, latency, connected: its socket open after READY)."""
    ready = client.is_ready()
    return [(sid, info.latency, ready and not info.is_closed()) for sid, info in sorted(client.shards.items())]


class GatewayCollector(Collector):
    """animegamer_bot_gateway_latency_seconds{shard} and animegamer_bot_gateway_connected{shard},
    read at scrape time from `source()` (set by BotMetrics.watch_gateway); none before that. A
    shard whose latency is not measured yet (no heartbeat answered) has no latency sample."""

    LATENCY = "animegamer_bot_gateway_latency_seconds"
    CONNECTED = "animegamer_bot_gateway_connected"

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[ShardState]] | None = None

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        latency = GaugeMetricFamily(
            self.LATENCY, "Time between a gateway HEARTBEAT and its ACK, per shard", labels=["shard"],
        )
        connected = GaugeMetricFamily(self.CONNECTED, "1 while the shard's gateway connection is open after READY", labels=["shard"])
        return latency, connected

    def describe(self):
        return list(self._families())

    def collect(self):
        latency, connected = self._families()
        if self.source is not None:
            for shard, seconds, up in self.source():
                if seconds is not None and math.isfinite(seconds):
                    latency.add_metric([str(shard)], float(seconds))
                connected.add_metric([str(shard)], 1.0 if up else 0.0)
        yield latency
        yield connected


class BotMetrics:
    def __init__(self, version: str | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.interactions = Counter(
            "animegamer_bot_interactions", "Interactions handled, by kind, command (or component family) and outcome",
            ["kind", "command", "outcome"], registry=r,
        )
        self.ack_seconds = Histogram(
            "animegamer_bot_ack_seconds", "Time from an interaction reaching the bot to its first response",
            ["kind"], buckets=ACK_BUCKETS, registry=r,
        )
        self.post_lag = Histogram(
            "animegamer_bot_post_lag_seconds", "Time from a turn's finish to its post being sent",
            buckets=POST_LAG_BUCKETS, registry=r,
        )
        self.edit_queue_depth = Gauge(
            "animegamer_bot_edit_queue_depth", "Message edits waiting in the per-channel edit scheduler", registry=r,
        )
        self.edit_wait = Histogram(
            "animegamer_bot_edit_wait_seconds", "Time from an edit being queued to it being applied",
            buckets=EDIT_WAIT_BUCKETS, registry=r,
        )
        self.post_retries = Counter("animegamer_bot_post_retries", "Posting tries that failed and will be tried again", registry=r)
        self.post_giveups = Counter("animegamer_bot_post_giveups", "Turns given up on after the last posting try", registry=r)
        self.config_cache = Counter(
            "animegamer_bot_config_cache_requests", "Config cache lookups, by result (hit or miss)", ["result"], registry=r,
        )
        self.database_up = Gauge("animegamer_database_up", "1 while the bot reaches its database, 0 while cut off", registry=r)
        self.database_up.set(1)
        self.queue_depth = Gauge("animegamer_queue_depth", "Turns waiting for a worker, per film", ["film"], registry=r)
        self.queue_oldest = Gauge(
            "animegamer_queue_oldest_seconds", "Age of the oldest turn waiting for a worker, per film", ["film"], registry=r,
        )
        self.info = Gauge("animegamer_bot_info", "Bot build", ["version"], registry=r)
        self.info.labels(version=version or package_version()).set(1)
        self.gateway = GatewayCollector()
        r.register(self.gateway)
        # Every label value known in advance starts at 0, so rates exist from the first scrape.
        for result in CACHE_RESULTS:
            self.config_cache.labels(result=result)
        self._films: set[str] = set()

    # --- interactions

    def interaction(self, kind: str, command: str, outcome: str) -> None:
        if kind not in KINDS or outcome not in OUTCOMES:
            raise ValueError(f"unknown interaction kind or outcome: {kind!r}, {outcome!r}")
        self.interactions.labels(kind=kind, command=command, outcome=outcome).inc()

    def acknowledged(self, kind: str, seconds: float) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown interaction kind: {kind!r}")
        self.ack_seconds.labels(kind=kind).observe(max(0.0, seconds))

    # --- posting and edits

    def posted(self, lag_seconds: float) -> None:
        self.post_lag.observe(max(0.0, lag_seconds))

    def edit_waited(self, seconds: float) -> None:
        self.edit_wait.observe(max(0.0, seconds))

    def cache(self, hit: bool) -> None:
        self.config_cache.labels(result="hit" if hit else "miss").inc()

    # --- state read elsewhere

    def set_database_up(self, up: bool) -> None:
        self.database_up.set(1 if up else 0)

    def set_queue(self, waiting: Mapping[str, tuple[int, float]], films: Iterable[str] = ()) -> None:
        """Set the queue gauges from service.queue_stats.waiting_by_film: {film: (turns, oldest age s)}.
        Films seen before (or listed in `films`, e.g. the configured ones) with nothing waiting
        read 0, so a drained queue shows 0 rather than a gap."""
        self._films |= set(films) | set(waiting)
        for film in self._films:
            depth, oldest = waiting.get(film, (0, 0.0))
            self.queue_depth.labels(film=film).set(depth)
            self.queue_oldest.labels(film=film).set(oldest)

    def watch_edit_queue(self, depth: Callable[[], float]) -> None:
        """Read the edit scheduler's queue depth from `depth()` at every scrape."""
        self.edit_queue_depth.set_function(depth)

    def watch_gateway(self, client: ShardedGateway) -> None:
        """Read the gateway's latency and state from this discord client at every scrape."""
        self.gateway.source = lambda: gateway_shards(client)

