"""play.metrics on a tiny aiohttp app: requests counted by route template (never the raw path),
method and status, including the page's JSON errors, router refusals and bugs; durations timed
except the event stream's; SSE clients read at scrape time; GET /metrics serves the registry. And
the page itself (play/app.py): the middleware outermost, /metrics scrapeable under any Host while
the same-origin guard still refuses that Host everywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from play.errors import errors_middleware, not_found
from play.metrics import UNMATCHED, PlayMetrics, add_metrics_route, metrics_middleware


def _app(metrics: PlayMetrics, static_dir: Path) -> web.Application:
    routes = web.RouteTableDef()

    @routes.get("/api/turns/{turn_id}")
    async def get_turn(request: web.Request) -> web.Response:
        if request.match_info["turn_id"] == "404":
            raise not_found("no such turn")  # the page's own refusal, made JSON by errors_middleware
        return web.json_response({"id": request.match_info["turn_id"]})

    @routes.post("/api/act")
    async def act(request: web.Request) -> web.Response:
        return web.json_response({"ok": True}, status=202)

    @routes.get("/api/gone")
    async def gone(request: web.Request) -> web.Response:
        raise web.HTTPGone()

    @routes.get("/api/broken")
    async def broken(request: web.Request) -> web.Response:
        raise KeyError("a bug")

    @routes.get("/api/events")
    async def events(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: {}\n\n")
        return resp

    # Outermost, as phase 2 mounts it in play/app.py: it sees the errors middleware's answers.
    app = web.Application(middlewares=[metrics_middleware(metrics), errors_middleware])
    app.router.add_routes(routes)
    app.router.add_static("/static/", static_dir)
    add_metrics_route(app, metrics)
    return app


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _requests(samples, route: str, method: str, status: int) -> float:
    key = ("animegamer_play_requests_total", frozenset({"route": route, "method": method, "status": str(status)}.items()))
    return samples.get(key, 0.0)


def _timed(samples, route: str) -> float:
    return samples.get(("animegamer_play_request_seconds_count", frozenset({"route": route}.items())), 0.0)


@pytest.fixture
def static_dir(tmp_path: Path) -> Path:
    (tmp_path / "app.js").write_text("// the page")
    return tmp_path


async def test_requests_are_counted_by_route_template_method_and_status(static_dir):
    metrics = PlayMetrics()
    async with TestClient(TestServer(_app(metrics, static_dir))) as client:
        for turn_id in ("1", "2", "31337"):
            assert (await client.get(f"/api/turns/{turn_id}")).status == 200
        assert (await client.get("/api/turns/404")).status == 404
        assert (await client.post("/api/act")).status == 202
        assert (await client.get("/api/gone")).status == 410
        assert (await client.get("/api/broken")).status == 500
        assert (await client.get("/no/such/page/12345")).status == 404
        assert (await client.delete("/api/act")).status == 405
        assert (await client.get("/static/app.js")).status == 200
        r = await client.get("/metrics")
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        samples = _samples(await r.text())

    assert _requests(samples, "/api/turns/{turn_id}", "GET", 200) == 3
    assert _requests(samples, "/api/turns/{turn_id}", "GET", 404) == 1
    assert _requests(samples, "/api/act", "POST", 202) == 1
    assert _requests(samples, "/api/gone", "GET", 410) == 1
    assert _requests(samples, "/api/broken", "GET", 500) == 1
    assert _requests(samples, UNMATCHED, "GET", 404) == 1
    assert _requests(samples, UNMATCHED, "DELETE", 405) == 1
    assert _requests(samples, "/static", "GET", 200) == 1
    assert _timed(samples, "/api/turns/{turn_id}") == 4
    # No raw path ever becomes a label value.
    routes = {dict(labels).get("route") for name, labels in samples if name.startswith("animegamer_play_request")}
    assert routes == {"/api/turns/{turn_id}", "/api/act", "/api/gone", "/api/broken", UNMATCHED, "/static"}


async def test_the_event_stream_is_counted_not_timed_and_its_clients_read_at_scrape(static_dir):
    metrics = PlayMetrics()
    open_streams = {"n": 0}
    metrics.watch_sse(lambda: open_streams["n"])
    async with TestClient(TestServer(_app(metrics, static_dir))) as client:
        r = await client.get("/api/events")
        assert r.status == 200 and await r.read() == b"data: {}\n\n"
        open_streams["n"] = 3
        samples = _samples(await (await client.get("/metrics")).text())
        assert samples[("animegamer_play_sse_clients", frozenset())] == 3
        open_streams["n"] = 1
        samples = _samples(await (await client.get("/metrics")).text())
    assert samples[("animegamer_play_sse_clients", frozenset())] == 1
    assert _requests(samples, "/api/events", "GET", 200) == 1
    assert _timed(samples, "/api/events") == 0  # a stream lasts as long as its tab: not timed
    assert _requests(samples, "/metrics", "GET", 200) == 1  # the first scrape, counted once answered


async def test_each_app_has_its_own_registry(static_dir):
    a, b = PlayMetrics(), PlayMetrics()  # two pages in one process (tests) do not clash
    async with TestClient(TestServer(_app(a, static_dir))) as client:
        await client.post("/api/act")
    labels = {"route": "/api/act", "method": "POST", "status": "202"}
    assert a.registry.get_sample_value("animegamer_play_requests_total", labels) == 1
    assert b.registry.get_sample_value("animegamer_play_requests_total", labels) is None


# --- the page itself (play/app.py mounts the middleware first and GET /metrics)


async def test_the_play_page_serves_its_metrics_to_any_host_and_keeps_the_guard_elsewhere(settings, engine, database_url, sessions):
    import aiohttp

    from tests.play.conftest import running_app

    async with running_app(settings, engine, database_url) as (base, svc), aiohttp.ClientSession() as http:
        port = base.rsplit(":", 1)[1]
        async with http.get(f"{base}/api/state") as r:
            assert r.status == 200
        async with http.get(f"{base}/api/turns/12345") as r:
            assert r.status == 404
        # Prometheus under a name the page does not answer to (a compose service, say): the scrape
        # is served; the same Host anywhere else is refused, as before.
        foreign = {"Host": f"play.example:{port}"}
        async with http.get(f"{base}/api/state", headers=foreign) as r:
            assert r.status == 403
        async with http.post(f"{base}/metrics", headers=foreign) as r:  # only a read passes
            assert r.status in (403, 405)
        events = await http.get(f"{base}/api/events")  # a tab's live updates, held open
        try:
            assert (await events.content.readuntil(b"\n\n")).startswith(b"retry:")
            async with http.get(f"{base}/metrics", headers=foreign) as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
                samples = _samples(await r.text())
            assert samples[("animegamer_play_sse_clients", frozenset())] == 1
            other = svc.hub.subscribe()  # another tab: read at the next scrape
            samples = _samples(await (await http.get(f"{base}/metrics")).text())
            assert samples[("animegamer_play_sse_clients", frozenset())] == 2
            svc.hub.unsubscribe(other)
        finally:
            events.close()
        samples = _samples(await (await http.get(f"{base}/metrics")).text())
    assert _requests(samples, "/api/state", "GET", 200) == 1
    assert _requests(samples, "/api/state", "GET", 403) == 1  # the guard's refusal counted: the middleware is outermost
    assert _requests(samples, "/api/turns/{turn_id}", "GET", 404) == 1
    assert _requests(samples, "/metrics", "GET", 200) == 2  # the scrapes before this one
    assert _timed(samples, "/api/state") == 2
