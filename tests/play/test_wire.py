"""The play page on the wire: what it sends back, byte for byte, to raw requests (HEAD on the event
stream, clip byte ranges, requests aiohttp cannot parse)."""

from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest

from db.models import Turn
from testkit.waits import wait_for
from tests.play.conftest import running_app

A = 1111
ACT = {"motion": "walk", "background": "town"}


@pytest.fixture
async def app(settings, engine, database_url, sessions):
    async with running_app(settings, engine, database_url) as (base, svc):
        yield base, svc


async def connect(base: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def read_response(reader: asyncio.StreamReader, *, head: bool = False, timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    """One response off a connection: (status, headers by lower-case name, body). `head`: the
    answer to a HEAD, which has no body whatever its headers say."""
    try:
        raw_head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except TimeoutError:
        raise AssertionError(f"no response head within {timeout} s") from None
    except asyncio.IncompleteReadError as e:
        raise AssertionError(f"no well-formed response head; the connection closed after {e.partial[:200]!r}") from None
    status_line, *lines = raw_head.decode("latin-1").split("\r\n")
    m = re.fullmatch(r"HTTP/1\.[01] ([0-9]{3}) .*", status_line)
    assert m, f"a broken status line: {status_line!r}"
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines if line)}
    if head:
        return int(m.group(1)), headers, b""
    assert "transfer-encoding" not in headers, headers  # every answer here has a length
    data = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), timeout)
    return int(m.group(1)), headers, data


async def test_head_on_the_event_stream_is_headers_only(app):
    """HEAD is GET without the body (RFC 9110 9.3.2): the stream's headers, no stream, and the
    keep-alive connection carries the next answer intact (not stream data where a status line
    should be)."""
    base, _ = app
    host = base.removeprefix("http://")
    reader, writer = await connect(base)
    try:
        writer.write(f"HEAD /api/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        status, headers, _ = await read_response(reader, head=True)
        assert status == 200 and headers["content-type"].startswith("text/event-stream"), headers
        assert "transfer-encoding" not in headers and headers.get("connection") != "close", headers

        writer.write(f"GET /api/state HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        status, headers, data = await read_response(reader)
        assert status == 200 and "films" in json.loads(data)
    finally:
        writer.close()
    # No subscriber is left behind by the HEAD.
    assert not app[1].hub.subscribers


CLIP = bytes(range(256)) * 4  # 1024 bytes, each offset recognisable


async def a_clip(http, base: str, sessions) -> int:
    """A turn with CLIP as its stored clip; returns its id."""
    assert (await http.post(f"{base}/api/start", json={})).status == 200
    assert (await http.post(f"{base}/api/join", json={"player_id": A, "name": "Ann", "character": "qiqi"})).status == 200
    async with http.post(f"{base}/api/act", json={"player_id": A, **ACT}) as r:
        turn_id = (await r.json())["turn_id"]
    async with sessions() as s, s.begin():
        t = await s.get(Turn, turn_id)
        t.mp4 = CLIP
    return turn_id


N = len(CLIP)
RANGES = [
    # (Range header, then If-Range or None; status; (first, last) for a 206)
    ("bytes=0-99", 206, (0, 99)),
    ("bytes=1000-", 206, (1000, N - 1)),
    ("bytes=-24", 206, (N - 24, N - 1)),
    ("bytes=0-0", 206, (0, 0)),
    ("bytes=1000-5000", 206, (1000, N - 1)),  # the last byte past the end: up to the end
    ("Bytes=0-9", 206, (0, 9)),  # the unit is case-insensitive
    ("bytes=0-999999999999999999999", 206, (0, N - 1)),
    ("bytes=-999999999999999999999", 206, (0, N - 1)),  # a suffix longer than the clip: all of it
    # Well-formed, but no byte of the clip in it: 416 with the size.
    ("bytes=999999999999999999999-", 416, None),
    ("bytes=999999999999999999999-999999999999999999999", 416, None),
    (f"bytes={N}-", 416, None),
    (f"bytes={N}-{N + 10}", 416, None),
    ("bytes=-0", 416, None),
    (f"bytes={N}-,{N + 5}-{N + 9}", 416, None),  # several ranges, none satisfiable
    # Several ranges with some satisfiable: answered whole (a server may ignore Range).
    ("bytes=0-1,5-6", 200, None),
    ("bytes=0-9, 20-29", 200, None),
    (f"bytes=0-1,{N}-", 200, None),
    # Malformed or another unit: ignored, the whole clip.
    ("bytes=5-3", 200, None),  # last before first: an invalid range-spec
    ("bytes=abc", 200, None),
    ("bytes=", 200, None),
    ("bytes=,", 200, None),
    ("bytes=-", 200, None),
    ("bytes = 0-9", 200, None),
    # Empty list elements are ignored (RFC 9110 5.6.1.2); numbers may be long.
    ("bytes=0-9,", 206, (0, 9)),
    ("bytes=, ,0-9", 206, (0, 9)),
    ("bytes=" + "0" * 5000 + "5-9", 206, (5, 9)),
    ("bytes=" + "9" * 5000 + "-", 416, None),
    ("bytes=-" + "9" * 5000, 206, (0, N - 1)),
    ("bytes=+1-5", 200, None),
    ("bytes=0x10-", 200, None),
    ("bytes=\u0661-\u0669", 200, None),  # Arabic-Indic digits are not DIGIT
    ("items=0-9", 200, None),
    ("bytes=" + ",".join(["0-0"] * 500), 200, None),
]


async def test_clip_byte_ranges(app, http, sessions):
    """RFC 9110 14: a satisfiable single range is a 206 with its Content-Range; a well-formed
    range set with no byte of the clip in it is a 416 with `Content-Range: bytes */size`; a
    malformed one, another unit, or several ranges are ignored (200, the whole clip). A range
    sent with If-Range is ignored too: the clip has no validator for it to match (13.1.5)."""
    base, _ = app
    turn_id = await a_clip(http, base, sessions)
    host = base.removeprefix("http://")
    path = f"/api/turns/{turn_id}/video.mp4"
    cases = [(r, None, status, span) for r, status, span in RANGES]
    cases += [
        ("bytes=0-99", '"some-etag"', 200, None),
        ("bytes=0-99", "Tue, 01 Dec 2026 10:00:00 GMT", 200, None),
    ]
    wrong = []
    for rng, if_range, want, span in cases:
        reader, writer = await connect(base)
        try:
            extra = f"If-Range: {if_range}\r\n" if if_range else ""
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nRange: {rng}\r\n{extra}Connection: close\r\n\r\n".encode())
            status, headers, data = await read_response(reader)
        finally:
            writer.close()
        name = f"{rng[:40]!r}" + (f" If-Range {if_range!r}" if if_range else "")
        if status != want:
            wrong.append(f"{name}: {status} (wanted {want}) {headers.get('content-range')}")
        elif want == 206:
            first, last = span
            if headers.get("content-range") != f"bytes {first}-{last}/{N}" or data != CLIP[first:last + 1]:
                wrong.append(f"{name}: Content-Range {headers.get('content-range')}, {len(data)} bytes")
        elif want == 416:
            if headers.get("content-range") != f"bytes */{N}" or json.loads(data)["error"] != "range_not_satisfiable":
                wrong.append(f"{name}: 416 with Content-Range {headers.get('content-range')}: {data[:100]!r}")
        elif data != CLIP or "content-range" in headers:
            wrong.append(f"{name}: 200 with {len(data)} bytes, Content-Range {headers.get('content-range')}")
        if status in (200, 206) and headers.get("accept-ranges") != "bytes":
            wrong.append(f"{name}: no Accept-Ranges")
    assert not wrong, f"{len(wrong)} of {len(cases)} ranges answered wrongly:\n" + "\n".join(wrong)


MALFORMED = [
    ("HTTP/9.9", b"GET /api/state HTTP/9.9\r\nHost: {host}\r\n\r\n"),
    ("a 20 KB header", b"GET /api/state HTTP/1.1\r\nHost: {host}\r\nX-Pad: " + b"a" * 20_000 + b"\r\n\r\n"),
    ("no Host on HTTP/1.1", b"GET /api/state HTTP/1.1\r\nAccept: */*\r\n\r\n"),
    ("two Hosts", b"GET /api/state HTTP/1.1\r\nHost: {host}\r\nHost: {host}\r\n\r\n"),
    ("a space in a header name", b"GET /api/state HTTP/1.1\r\nHost: {host}\r\nBad Header: x\r\n\r\n"),
    ("Content-Length not a number", b"POST /api/reset HTTP/1.1\r\nHost: {host}\r\nContent-Length: 1e3\r\n\r\n"),
    ("a control character in the target", b"GET /api/st\x01ate HTTP/1.1\r\nHost: {host}\r\n\r\n"),
    # A body that does not decode: aiohttp raises it to the handler that reads the body, and
    # logs it again as it reads what is left after the answer.
    ("a gzip body that is not gzip", b"POST /api/pause HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n"
     b"Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 15\r\n\r\n{\"paused\":true}"),
    ("a chunk longer than it says", b"POST /api/pause HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n"
     b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"paused\":true}\r\n0\r\n\r\n"),
    # aiohttp logs a bad method as the first request at DEBUG (a TLS or non-HTTP client), but as
    # an ERROR on a connection that already made a request.
    ("an unknown method after a good request", b"GARBAGE / HTTP/1.1\r\nHost: {host}\r\n\r\n"),
]


def _shown(caplog) -> list:
    """The log records an operator sees (INFO and up, not the libraries' own)."""
    return [r for r in caplog.records if r.levelno >= logging.INFO and not r.name.startswith(("asyncio", "sqlalchemy"))]


@pytest.mark.parametrize("name,request_bytes", MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_malformed_request_is_a_400_and_one_log_line(app, caplog, name, request_bytes):
    """A request aiohttp cannot parse is the client's mistake: a 400, and one line in the log (no
    traceback), so that any client cannot fill the operator's log with ERRORs. RFC 9112 3.2: no
    Host on HTTP/1.1, or two, is a 400."""
    base, _ = app
    host = base.removeprefix("http://").encode()
    caplog.set_level(logging.DEBUG)
    reader, writer = await connect(base)
    try:
        if name.endswith("after a good request"):
            writer.write(b"GET /api/state HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
            assert (await read_response(reader))[0] == 200
        writer.write(request_bytes.replace(b"{host}", host))
        status, _, _ = await read_response(reader)
        assert status == 400
        await wait_for(lambda: _shown(caplog), timeout=5, what="the log line (written after the answer)")
    finally:
        writer.close()
    shown = _shown(caplog)
    assert len(shown) == 1, [(r.name, r.levelname, r.getMessage()) for r in shown]
    [line] = shown
    assert line.levelno == logging.WARNING and line.exc_info is None and line.exc_text is None
    text = line.getMessage()
    assert "\n" not in text and len(text) < 400, text
    if "gzip" not in name:  # aiohttp names the peer, except when it reads a body's rest after the answer
        assert "from 127.0.0.1" in text, text
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
