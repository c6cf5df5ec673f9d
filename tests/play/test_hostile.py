"""Hostile requests against the play page's API, one table row each: the status and the error
shape (`{"error", "message", "field"?}`) are checked for every row; none may be a 500, and after
all of them nothing was stored that should not be (the game is not paused, reset or acted on,
no player was added, the cast is unchanged).

Rows are sent as raw bytes where a client library would not send them (a body shorter than its
Content-Length, no Host), else with aiohttp and explicit headers (no Origin added for us)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from dataclasses import field as dc_field

import aiohttp
import pytest
from sqlalchemy import select

from db.models import GameSession, GuildSettings, Player, Turn
from tests.play.conftest import running_app

A = 1111
BIG = 2**64
JSON = "application/json"


@dataclass
class Case:
    name: str
    method: str
    path: str
    body: bytes | str | None = b"{}"
    status: int = 400
    code: str = "bad_request"
    field: str | None = None
    headers: dict = dc_field(default_factory=dict)  # "{origin}" / "{host}" are filled in; None removes a header


def body(**kw) -> bytes:
    return json.dumps(kw).encode()


def raw_json(text: str) -> bytes:
    return text.encode()


ACT = {"motion": "walk", "background": "town"}
def deep(n: int) -> bytes:
    return b'{"player_id": ' + b"[" * n + b"]" * n + b"}"

CASES = [
    # --- numbers that are not ids
    Case("player_id Infinity", "POST", "/api/act", raw_json('{"player_id": Infinity, "motion": "walk", "background": "town"}'), field="player_id"),
    Case("player_id -Infinity", "POST", "/api/leave", raw_json('{"player_id": -Infinity}'), field="player_id"),
    Case("player_id NaN", "POST", "/api/leave", raw_json('{"player_id": NaN}'), field="player_id"),
    Case("player_id 1e400", "POST", "/api/act", raw_json('{"player_id": 1e400, "motion": "walk", "background": "town"}'), field="player_id"),
    Case("player_id 12345.7", "POST", "/api/act", body(player_id=12345.7, **ACT), field="player_id"),
    Case("player_id 1111.0", "POST", "/api/act", body(player_id=1111.0, **ACT), field="player_id"),
    Case("player_id as text", "POST", "/api/act", body(player_id=str(A), **ACT), field="player_id"),
    Case("player_id true", "POST", "/api/leave", body(player_id=True), field="player_id"),
    Case("player_id 0", "POST", "/api/leave", body(player_id=0), field="player_id"),
    Case("player_id negative", "POST", "/api/leave", body(player_id=-5), field="player_id"),
    Case("player_id 2^53", "POST", "/api/join", body(player_id=2**53, name="X", character="tombo"), field="player_id"),
    Case("player_id 2^64", "POST", "/api/join", body(player_id=BIG, name="X", character="tombo"), field="player_id"),
    Case("player_id 10^400 digits", "POST", "/api/leave", raw_json('{"player_id": 1' + "0" * 400 + "}"), field="player_id"),
    Case("player_id null", "POST", "/api/leave", body(player_id=None), field="player_id"),
    Case("player_id missing", "POST", "/api/act", body(**ACT), field="player_id"),
    # --- wrong types, quietly accepted before
    Case("paused 'no'", "POST", "/api/pause", body(paused="no"), field="paused"),
    Case("paused 'false'", "POST", "/api/pause", body(paused="false"), field="paused"),
    Case("paused 1", "POST", "/api/pause", body(paused=1), field="paused"),
    Case("paused missing", "POST", "/api/pause", body(), field="paused"),
    Case("enabled 'false'", "POST", "/api/cast", body(character="tombo", enabled="false"), field="enabled"),
    Case("enabled 0", "POST", "/api/cast", body(character="tombo", enabled=0), field="enabled"),
    Case("film null", "POST", "/api/film", body(film=None), field="film"),
    Case("film a number", "POST", "/api/film", body(film=7), field="film"),
    Case("film 10 KB", "POST", "/api/film", body(film="p" * 10_000), field="film"),
    Case("characters a string", "POST", "/api/act", body(player_id=A, characters="jiji", **ACT), field="characters"),
    Case("characters numbers", "POST", "/api/act", body(player_id=A, characters=[1, 2], **ACT), field="characters"),
    Case("characters 17 names", "POST", "/api/act", body(player_id=A, characters=["jiji"] * 17, **ACT), field="characters"),
    Case("motion an object", "POST", "/api/act", body(player_id=A, motion={"x": 1}, background="town"), field="motion"),
    Case("motion 10 KB", "POST", "/api/act", body(player_id=A, motion="w" * 10_000, background="town"), field="motion"),
    Case("name 1 KB", "POST", "/api/join", body(player_id=3, name="n" * 1000, character="tombo"), field="name"),
    Case("name only NUL and bidi", "POST", "/api/join", body(player_id=3, name="\u0000\u202e\u200b", character="tombo"),
         code="input_refused", field="name"),
    Case("name 33 visible", "POST", "/api/join", body(player_id=3, name="n" * 33, character="tombo"), code="input_refused", field="name"),
    Case("unknown field", "POST", "/api/pause", body(paused=True, admin=True), field="admin"),
    Case("body for a bodiless action", "POST", "/api/reset", body(confirm=True), field="confirm"),
    # --- JSON itself
    Case("nested 30,000 deep (60 KB)", "POST", "/api/act", deep(30_000), 413, "too_large"),
    Case("nested 5,000 deep (10 KB)", "POST", "/api/act", deep(5_000)),
    Case("not JSON", "POST", "/api/pause", b"paused=true"),
    Case("a JSON array", "POST", "/api/pause", b"[true]"),
    Case("a JSON string", "POST", "/api/pause", b'"true"'),
    Case("empty body", "POST", "/api/join", b""),
    Case("invalid UTF-8", "POST", "/api/film", b'{"film": "\xff\xfe"}'),
    Case("lone surrogate escape", "POST", "/api/film", raw_json('{"film": "\\ud800"}')),
    Case("duplicate keys, last a string", "POST", "/api/pause", raw_json('{"paused": true, "paused": "no"}'), field="paused"),
    # --- media types and sizes
    Case("charset=foobar", "POST", "/api/pause", body(paused=True), 415, "unsupported_media_type",
         headers={"Content-Type": "application/json; charset=foobar"}),
    Case("charset=latin-1", "POST", "/api/pause", body(paused=True), 415, "unsupported_media_type",
         headers={"Content-Type": "application/json; charset=latin-1"}),
    Case("text/plain body", "POST", "/api/pause", body(paused=True), 415, "unsupported_media_type", headers={"Content-Type": "text/plain"}),
    Case("form body", "POST", "/api/reset", b"a=1", 415, "unsupported_media_type",
         headers={"Content-Type": "application/x-www-form-urlencoded"}),
    Case("no body, no type", "POST", "/api/reset", None, 415, "unsupported_media_type", headers={"Content-Type": None}),
    Case("20 KB body", "POST", "/api/act", body(player_id=A, pad="x" * 20_000), 413, "too_large"),
    # --- ids and numbers in paths and queries
    Case("turn id 2^64", "GET", f"/api/turns/{BIG}", None, 404, "not_found"),
    Case("turn id 2^63", "GET", f"/api/turns/{2**63}", None, 404, "not_found"),
    Case("turn id 30 digits, video", "GET", "/api/turns/" + "9" * 30 + "/video.mp4", None, 404, "not_found"),
    Case("turn id 2^64, cancel", "POST", f"/api/turns/{BIG}/cancel", b"{}", 404, "not_found"),
    Case("turn id negative", "GET", "/api/turns/-1", None, 404, "not_found"),
    Case("turn id 1e3", "GET", "/api/turns/1e3", None, 404, "not_found"),
    Case("turn id unknown", "GET", "/api/turns/987654321", None, 404, "not_found"),
    Case("before 2^31", "GET", f"/api/turns?before={2**31}", None, field="before"),
    Case("before -1", "GET", "/api/turns?before=-1", None, field="before"),
    Case("before 1.5", "GET", "/api/turns?before=1.5", None, field="before"),
    Case("limit 1e3", "GET", "/api/turns?limit=1e3", None, field="limit"),
    Case("limit 0", "GET", "/api/turns?limit=0", None, field="limit"),
    Case("limit 1_000", "GET", "/api/turns?limit=1_000", None, field="limit"),
    Case("player Infinity", "GET", "/api/state?player=Infinity", None, field="player"),
    Case("player 1e400", "GET", "/api/state?player=1e400", None, field="player"),
    Case("player 2^64", "GET", f"/api/state?player={BIG}", None, field="player"),
    Case("suggest unknown field", "GET", "/api/suggest?field=__class__", None, field="field"),
    Case("suggest 1 KB query", "GET", "/api/suggest?field=motion&q=" + "a" * 1000, None, field="q"),
    # --- routes and methods
    Case("unknown route", "GET", "/api/nope", None, 404, "not_found"),
    Case("unknown static file", "GET", "/static/../../etc/passwd", None, 404, "not_found"),
    Case("PUT on an action", "PUT", "/api/pause", body(paused=True), 405, "method_not_allowed"),
    Case("DELETE on the state", "DELETE", "/api/state", None, 405, "method_not_allowed"),
    Case("GET on an action", "GET", "/api/reset", None, 405, "method_not_allowed"),
    # --- other origins (CSRF, DNS rebinding)
    Case("Host evil.example.com", "GET", "/api/state", None, 403, "forbidden", headers={"Host": "evil.example.com"}),
    Case("Host rebound name with our port", "GET", "/", None, 403, "forbidden", headers={"Host": "evil.example.com:{port}"}),
    Case("Host another port", "GET", "/api/state", None, 403, "forbidden", headers={"Host": "127.0.0.1:1"}),
    Case("Host with credentials", "GET", "/api/state", None, 403, "forbidden", headers={"Host": "a@127.0.0.1:{port}"}),
    Case("cross-origin text/plain pause", "POST", "/api/pause", body(paused=True), 403, "forbidden",
         headers={"Origin": "http://evil.example.com", "Content-Type": "text/plain"}),
    Case("cross-origin bodiless reset", "POST", "/api/reset", None, 403, "forbidden",
         headers={"Origin": "http://evil.example.com", "Content-Type": None}),
    Case("cross-origin act", "POST", "/api/act", body(player_id=A, **ACT), 403, "forbidden", headers={"Origin": "http://localhost:1"}),
    Case("Origin null", "POST", "/api/pause", body(paused=True), 403, "forbidden", headers={"Origin": "null"}),
    Case("Origin https of our host", "POST", "/api/pause", body(paused=True), 403, "forbidden", headers={"Origin": "https://{host}"}),
    Case("no Origin on a POST", "POST", "/api/reset", b"{}", 403, "forbidden", headers={"Origin": None}),
    Case("cross-origin read", "GET", "/api/state", None, 403, "forbidden", headers={"Origin": "http://evil.example.com"}),
]


async def send(http: aiohttp.ClientSession, base: str, case: Case) -> tuple[int, dict | None, str]:
    host = base.removeprefix("http://")
    port = host.rsplit(":", 1)[1]
    headers = {"Origin": base, "Content-Type": JSON}
    for k, v in case.headers.items():
        headers[k] = None if v is None else v.format(origin=base, host=host, port=port)
    skip = {k for k, v in headers.items() if v is None}
    headers = {k: v for k, v in headers.items() if v is not None}
    async with http.request(case.method, base + case.path, data=case.body, headers=headers, skip_auto_headers=skip) as r:
        text = await r.text(errors="replace")
        try:
            return r.status, json.loads(text), r.headers.get("Content-Type", "")
        except ValueError:
            return r.status, None, text


async def raw(base: str, request: bytes, *, timeout: float = 10) -> tuple[int, dict | None, float]:
    """Send bytes as they are; returns (status, JSON body or None, seconds until the answer)."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    t0 = asyncio.get_running_loop().time()
    try:
        writer.write(request)
        await writer.drain()
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        except (TimeoutError, asyncio.IncompleteReadError):
            return 0, None, timeout  # held open, or closed without an answer
        took = asyncio.get_running_loop().time() - t0
        status = int(head.split(b" ", 2)[1])
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
        data = await asyncio.wait_for(reader.readexactly(length), timeout) if length else b""
        try:
            return status, json.loads(data), took
        except ValueError:
            return status, None, took
    finally:
        writer.close()


def check_shape(status: int, data, expect_status: int, code: str, field_name: str | None) -> str | None:
    """None if the answer is right; else what is wrong."""
    if status != expect_status:
        return f"status {status} (wanted {expect_status}): {data}"
    if not isinstance(data, dict) or set(data) - {"error", "message", "field"} or not isinstance(data.get("message"), str):
        return f"not the JSON error shape: {data!r}"
    if data["error"] != code:
        return f"error {data['error']!r} (wanted {code!r}): {data['message']}"
    if field_name is not None and data.get("field") != field_name:
        return f"field {data.get('field')!r} (wanted {field_name!r}): {data['message']}"
    if not data["message"].strip():
        return "an empty message"
    return None


@pytest.fixture
async def app(settings, engine, database_url, sessions):
    async with running_app(settings, engine, database_url) as (base, svc):
        yield base, svc


async def test_hostile_requests_get_clear_4xx_and_change_nothing(app, http, sessions, monkeypatch, caplog):
    base, _ = app
    import play.requests

    monkeypatch.setattr(play.requests, "BODY_TIMEOUT", 1.0)
    assert (await http.post(f"{base}/api/start", json={})).status == 200
    assert (await http.post(f"{base}/api/join", json={"player_id": A, "name": "Ann", "character": "qiqi"})).status == 200
    async with sessions() as s:
        before = (await s.scalars(select(GameSession))).one()

    wrong = []
    async with aiohttp.ClientSession() as plain:  # no Origin added: each row says what it sends
        for case in CASES:
            status, data, _ = await send(plain, base, case)
            problem = check_shape(status, data, case.status, case.code, case.field)
            if problem:
                wrong.append(f"{case.name}: {problem}")

    host = base.removeprefix("http://")
    head = f"Host: {host}\r\nOrigin: {base}\r\nContent-Type: application/json\r\n".encode()
    raw_cases = [
        # Declares 100 MB, sends 10 bytes: refused at once from the declaration, not held open.
        ("Content-Length 100 MB, 10 bytes sent", b"POST /api/join HTTP/1.1\r\n" + head + b"Content-Length: 100000000\r\n\r\n{\"a\": 12}", 413, "too_large", 5),
        # Declares 50 bytes, sends 10, then nothing: answered when the body read times out.
        ("body never finishes", b"POST /api/pause HTTP/1.1\r\n" + head + b"Content-Length: 50\r\n\r\n{\"paused\":", 408, "timeout", 5),
        ("no Host at all", b"POST /api/reset HTTP/1.0\r\nOrigin: " + base.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 403, "forbidden", 5),
    ]
    for name, request, want, code, limit in raw_cases:
        status, data, took = await raw(base, request)
        problem = check_shape(status, data, want, code, None) or (f"answered after {took:.1f} s" if took > limit else None)
        if problem:
            wrong.append(f"{name}: {problem}")

    total = len(CASES) + len(raw_cases)
    assert not wrong, f"{len(wrong)} of {total} hostile requests were answered wrongly:\n" + "\n".join(wrong)
    assert total >= 80
    assert not [r for r in caplog.records if r.levelname == "ERROR"], "a hostile request was logged as a bug"

    # Nothing was stored: the same session, active, one player, no turn, the whole cast.
    async with sessions() as s:
        [gs] = (await s.scalars(select(GameSession))).all()
        assert (gs.id, gs.status, gs.paused_reason) == (before.id, "active", None)
        assert [(p.user_id, p.user_name) for p in (await s.scalars(select(Player))).all()] == [(A, "Ann")]
        assert (await s.scalars(select(Turn))).all() == []
        g = await s.get(GuildSettings, 1)
        assert (g.film_id, g.playable) == ("qiqi", None)


async def test_free_text_is_cleaned_and_ids_kept_exact(app, http, sessions):
    """Accepted, but cleaned: a name with NUL, bidi and zero-width characters is stored without
    them; an id at the top of the page's range is stored exactly."""
    base, _ = app
    top = 2**53 - 1
    assert (await http.post(f"{base}/api/start", json={})).status == 200
    async with http.post(f"{base}/api/join", json={"player_id": top, "name": "A\u0000n\u202en\u200b <@123>", "character": "qiqi"}) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["name"] == "Ann <@123>"
    async with http.get(f"{base}/api/state?player={top}") as r:
        assert (await r.json())["me"] == {"name": "Ann <@123>", "character": "qiqi"}
    async with sessions() as s:
        assert (await s.scalars(select(Player.user_id))).all() == [top]


async def test_a_bug_is_a_logged_500_in_the_same_shape(caplog):
    """The one case that may answer 500: a real bug. It is logged with its traceback and
    answered in the page's error shape, without the exception's text."""
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from play.errors import errors_middleware

    async def broken(request):
        raise KeyError("secret internals")

    app = web.Application(middlewares=[errors_middleware])
    app.router.add_get("/api/broken", broken)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/api/broken")
        data = await r.json()
    assert r.status == 500 and data["error"] == "internal" and "secret" not in data["message"]
    [record] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "GET /api/broken failed" in record.getMessage() and record.exc_info[0] is KeyError


@pytest.mark.parametrize("bound,local,host,ok", [
    ("127.0.0.1", "127.0.0.1", "127.0.0.1:8080", True),
    ("127.0.0.1", "127.0.0.1", "localhost:8080", True),
    ("127.0.0.1", "127.0.0.1", "LOCALHOST.:8080", True),
    ("127.0.0.1", "127.0.0.1", "127.0.0.1:8081", False),
    ("127.0.0.1", "127.0.0.1", "127.0.0.1", False),  # port 80 is not ours
    ("127.0.0.1", "127.0.0.1", "evil.example.com:8080", False),
    ("::1", "::1", "[::1]:8080", True),
    ("gamebox.lan", "192.168.1.5", "gamebox.lan:8080", True),  # the --host name
    ("gamebox.lan", "192.168.1.5", "192.168.1.5:8080", True),  # the address it came in on
    ("0.0.0.0", "192.168.1.5", "10.0.0.7:8080", True),  # every interface: any address...
    ("0.0.0.0", "192.168.1.5", "rebound.example.com:8080", False),  # ...but no other name
])
def test_host_names_this_server(bound, local, host, ok):
    from unittest import mock

    from aiohttp.test_utils import make_mocked_request

    from play.guard import allowed_host
    from play.page import PAGE, Page

    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda key, default=None: (local, 8080) if key == "sockname" else default
    app = {PAGE: Page(settings=None, store=None, hub=None, host=bound)}
    request = make_mocked_request("GET", "/api/state", headers={"Host": host}, transport=transport, app=app)
    assert (allowed_host(request) is not None) == ok
