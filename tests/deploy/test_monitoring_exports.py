"""Every metric the monitoring profile's Grafana dashboard and alert rules use (docker/monitoring/)
is one the processes export, each process exports the metrics the issue lists, and their samples
show the turn that went through them.

The exported metrics come from `exposition_texts()`, which scrapes the real processes' /metrics
once a turn went through them: the bot (AnimeGamerBot on the fake Discord, /metrics on its health
port), a preview worker (inference.worker.Worker, its metrics port) and the play page (its aiohttp
app), all on the test Postgres, in this process (the worker's and the page's own subprocesses are
covered elsewhere; here each serves its /metrics over HTTP as in production).
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import discord
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from tests.deploy.test_monitoring_config import base_name, dashboard_expressions, promql_metric_names, rule_expressions

# Series Prometheus makes itself for every target.
PROMETHEUS_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_series_added"})


# --- what the processes export


async def _scrape(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain"), (url, r.status)
        return await r.text()


async def exposition_texts(database_url: str, engine, data_dir) -> list[tuple[str, str]]:
    """(process, the text its /metrics answered) for the bot, a preview worker and the play page,
    started for real on the test database, after a turn went through the bot and the worker
    (played on the fake Discord: queued, generated, posted) and requests reached the page, so that
    their histograms have samples; everything is stopped again before returning."""
    from bot.client import AnimeGamerBot
    from db.engine import make_sessionmaker
    from db.runtime import open_database
    from inference.worker import Worker
    from service.runtime import Store
    from settings import Settings
    from testkit.fake_discord import FakeDiscord, patch_discord, start_client, stop_client
    from testkit.queue import wait_started
    from tests.bot.conftest import World
    from tests.bot.helpers import posted_turns, result, say, setup_game
    from tests.conftest import APP_TABLES, QUEUE_TABLES
    from tests.play.conftest import running_app

    async with engine.begin() as conn:
        await conn.execute(text(f"TRUNCATE {', '.join(APP_TABLES + QUEUE_TABLES)} RESTART IDENTITY CASCADE"))
    settings = Settings(**{  # as tests/queue/conftest.py's qsettings
        "database_url": database_url, "data_dir": data_dir, "cooldown_seconds": 0, "queue_poll_interval": 0.2,
        "stalled_after": 5.0, "metrics_port": 0, "history_window": 2, "_env_file": None,
    })
    async with FakeDiscord() as server, open_database(settings) as db, aiohttp.ClientSession() as http:
        g = server.create_guild("Monitoring")
        w = World(
            server=server, guild=g, games=g.create_text_channel("games"), games2=g.create_text_channel("games-2"),
            admin_role=g.create_role("Game Admins"), mod_role=g.create_role("Game Mods"), owner=g.owner,
            alice=g.create_member("alice"), bob=g.create_member("bob"), carol=g.create_member("carol"),
            dave=g.create_member("dave"),
            erin=g.create_member("erin", roles=[g.create_role("Admins", permissions=discord.Permissions(manage_guild=True))]),
        )
        worker = Worker(settings, backend="preview", backend_options={"width": 96, "height": 64}, films=["qiqi"],
                        metrics_host="127.0.0.1", metrics_port=-1, install_signal_handlers=False, migrate=False,
                        progress_interval=0.1)
        worker_task = asyncio.create_task(worker.run())
        with patch_discord(server):
            bot = AnimeGamerBot(settings, Store(db), guild_ready_timeout=0.05, sweep_seconds=1.0, health_address=("127.0.0.1", 0))
            bot_task = await start_client(server, bot)
            try:
                await bot.tree.sync()
                await wait_started(worker, worker_task)
                async with running_app(settings, engine, database_url) as (base, _svc):
                    # One turn through the bot and the worker, and a refusal on the way.
                    await setup_game(w)
                    assert "have not joined" in await say(w, w.carol, "act", {"motion": "run", "background": "town"})
                    assert "is queued" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
                    await result(w, 1, timeout=30)
                    await posted_turns(make_sessionmaker(engine), 1)
                    # The page: its state and a tab's event stream open while it is scraped.
                    async with http.get(f"{base}/api/state") as r:
                        assert r.status == 200
                    events = await http.get(f"{base}/api/events")
                    try:
                        await events.content.readuntil(b"\n\n")
                        texts = [
                            ("bot", await _scrape(http, f"http://127.0.0.1:{bot.health_port}/metrics")),
                            ("worker", await _scrape(http, f"http://127.0.0.1:{worker.bound_metrics_port}/metrics")),
                            ("play", await _scrape(http, f"{base}/metrics")),
                        ]
                    finally:
                        events.close()
            finally:
                await stop_client(bot, bot_task)
                worker.stop()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(worker_task, 30)
    return texts


@pytest_asyncio.fixture(scope="module")
async def scraped(database_url, engine, tmp_path_factory) -> list[tuple[str, str]]:
    """The real processes' /metrics, scraped once for this module's tests."""
    return await exposition_texts(database_url, engine, tmp_path_factory.mktemp("monitoring") / "data")


_SERIES_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("", "_count", "_sum"),
    "info": ("_info",),
}


def names_in_exposition(text: str) -> set[str]:
    """Every series name a scrape of `text` can hold: the samples present, and for each declared
    family (a labelled metric has no samples until its first use) the names of its type."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        names |= {family.name + suffix for suffix in _SERIES_SUFFIXES.get(family.type, ("",))}
    return names


def exported_metric_names(texts: list[tuple[str, str]]) -> dict[str, set[str]]:
    """{series name: the processes that export it}."""
    out: dict[str, set[str]] = {}
    for process, exposition in texts:
        for name in names_in_exposition(exposition):
            out.setdefault(name, set()).add(process)
    return out


def test_exposition_names_include_each_types_series_even_before_any_sample():
    text = "\n".join([
        "# HELP a_total A counter", "# TYPE a_total counter",
        "# HELP h A histogram", "# TYPE h histogram",
        "# HELP g A gauge", "# TYPE g gauge", "g 1.0", "",
    ])
    assert names_in_exposition(text) == {"a_total", "h_bucket", "h_count", "h_sum", "g"}


# --- the dashboard and the rules against the processes


def test_every_metric_the_dashboard_and_rules_use_is_exported(scraped):
    exported = exported_metric_names(scraped)
    used = dashboard_expressions() + rule_expressions()
    assert len(used) >= 30
    missing = sorted(
        f"{where}: {name} (family {base_name(name)})"
        for where, expr in used
        for name in promql_metric_names(expr)
        if name not in exported and name not in PROMETHEUS_SERIES
    )
    assert not missing, "metrics used but exported by no process:\n" + "\n".join(missing)


def test_each_process_exports_the_metrics_the_issue_lists(scraped):
    exported = exported_metric_names(scraped)
    expected = {
        "bot": ["animegamer_bot_interactions_total", "animegamer_bot_ack_seconds_bucket", "animegamer_bot_post_lag_seconds_bucket",
                "animegamer_bot_edit_queue_depth", "animegamer_bot_edit_wait_seconds_bucket", "animegamer_bot_post_retries_total",
                "animegamer_bot_post_giveups_total", "animegamer_bot_gateway_latency_seconds", "animegamer_bot_gateway_connected",
                "animegamer_bot_config_cache_requests_total", "animegamer_database_up", "animegamer_queue_depth",
                "animegamer_queue_oldest_seconds", "animegamer_bot_info"],
        "play": ["animegamer_play_requests_total", "animegamer_play_request_seconds_bucket", "animegamer_play_sse_clients"],
        "worker": ["animegamer_turns_total", "animegamer_stage_seconds_bucket", "animegamer_gpu_memory_allocated_bytes",
                   "animegamer_gpu_memory_reserved_bytes", "animegamer_turn_gpu_peak_bytes", "animegamer_decoder_preset_info",
                   "animegamer_database_up"],
    }
    for process, names in expected.items():
        absent = [n for n in names if process not in exported.get(n, set())]
        assert not absent, f"{process} does not export {absent}"


def test_the_real_processes_measured_the_turn_that_went_through_them(scraped):
    samples = {
        (process, s.name, frozenset(s.labels.items())): s.value
        for process, exposition in scraped
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
    }

    def value(process: str, name: str, **labels: str) -> float | None:
        return samples.get((process, name, frozenset(labels.items())))

    # The bot: five commands (admin film, game start, game join, a refused act, an act) answered and
    # timed, the turn posted (its lag), its status message edited, the cache asked, the gateway up.
    assert value("bot", "animegamer_bot_interactions_total", kind="command", command="act", outcome="refused") == 1
    assert value("bot", "animegamer_bot_interactions_total", kind="command", command="act", outcome="ok") == 1
    assert value("bot", "animegamer_bot_ack_seconds_count", kind="command") == 5
    assert value("bot", "animegamer_bot_post_lag_seconds_count") == 1
    assert (value("bot", "animegamer_bot_edit_wait_seconds_count") or 0) >= 1
    assert (value("bot", "animegamer_bot_config_cache_requests_total", result="miss") or 0) >= 1
    assert value("bot", "animegamer_bot_gateway_connected", shard="0") == 1
    assert value("bot", "animegamer_database_up") == 1
    assert value("bot", "animegamer_queue_depth", film="qiqi") is not None  # every film, from the first refresh
    # The worker: the turn done, its stages timed.
    assert value("worker", "animegamer_turns_total", film="qiqi", status="done") == 1
    assert value("worker", "animegamer_stage_seconds_count", film="qiqi", stage="render") == 1
    assert value("worker", "animegamer_stage_seconds_count", film="qiqi", stage="encode") == 1
    assert value("worker", "animegamer_database_up") == 1
    # The page: its request counted and timed by route, the open stream counted.
    assert value("play", "animegamer_play_requests_total", route="/api/state", method="GET", status="200") == 1
    assert value("play", "animegamer_play_request_seconds_count", route="/api/state") == 1
    assert value("play", "animegamer_play_sse_clients") == 1
