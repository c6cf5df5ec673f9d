"""The review page's API on a small prepared folder the tests make (real MP4s from ffmpeg, JPEG
stills, a cast with reference PNGs): filters and counts, an edit saved durably and seen by a new
app on the same folder, every kind of bad edit refused with nothing changed, a torn review log,
media served from the folder only (with byte ranges), and the page answering only to itself."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from PIL import Image

from film.cast import Cast, Member, save_cast
from film.manifest import MANIFEST, REVIEW_LOG, Clip, read_manifest, write_manifest
from film.review import make_app, serve

REPO = Path(__file__).resolve().parents[2]
TOKEN = "review-Token_123"
PALE = "needs_review"


def _clip(n: int, shot: int, **fields) -> Clip:
    cid = f"film-{shot:04d}-{n:02d}"
    return Clip(id=cid, source="film.mp4", shot=shot, start_s=2.125 * n + 10 * shot, end_s=2.125 * (n + 1) + 10 * shot,
                clip=f"clips/{cid}.mp4", stills=tuple(f"stills/{cid}/{i}.jpg" for i in range(2)), **fields)


CLIPS = [
    _clip(0, 0, motion_flow=0.31, motion_level=1, status=PALE, issue="no captioner configured"),
    _clip(1, 0, motion_flow=9.2, motion_level=3, status="captioned", character="qiqi", motion="fly on broomstick",
          adverb="slowly", background="sky", time="day", social=0, entertainment=1, stamina=-1, caption_level=3),
    _clip(0, 1, motion_flow=2.4, motion_level=2, status="captioned", character="jiji", motion="walk",
          background="street"),
    _clip(0, 2, motion_flow=41.0, motion_level=5, status=PALE, issue="character 'tombo' is not in the cast",
          motion="run", background="bakery"),
]


def build_folder(folder: Path) -> Path:
    """A prepared folder as `film prepare` leaves it: clips, stills, cast, manifest, settings."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, c in enumerate(CLIPS):
        mp4 = folder / c.clip
        mp4.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc=size=240x160:rate=8:n={n}",
                        "-frames:v", "17", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart",
                        str(mp4)], check=True)
        for i, still in enumerate(c.stills):
            (folder / still).parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (240, 160), (40 * n, 90 + 60 * i, 160)).save(folder / still, "JPEG")
    refs = folder.parent / f"{folder.name}-refs"
    refs.mkdir(exist_ok=True)
    members = []
    for cid, name, colour in (("qiqi", "Qiqi", (200, 40, 60)), ("jiji", "Jiji", (20, 20, 20))):
        Image.new("RGB", (96, 96), colour).save(refs / f"{cid}.png")
        members.append(Member(cid, name, refs / f"{cid}.png"))
    save_cast(Cast(tuple(members)), folder)
    write_manifest(folder, CLIPS)
    (folder / "settings.json").write_text(json.dumps({"film": "qiqi"}), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return build_folder(tmp_path_factory.mktemp("review") / "prepared")


@pytest.fixture
def folder(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "prepared"))


@contextlib.asynccontextmanager
async def client(app: web.Application):
    """A test client whose requests say where they come from, as the page's fetches do."""
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        c.origin = f"http://127.0.0.1:{c.port}"
        yield c


async def post(c, clip_id: str, body, **headers):
    return await c.post(f"/api/clips/{clip_id}", data=json.dumps(body),
                        headers={"Origin": c.origin, "Content-Type": "application/json", **headers})


async def raw_get(port: int, path: str) -> tuple[int, bytes]:
    """A GET with the path sent byte for byte (an HTTP client would normalise `..` away)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def snapshot(folder: Path) -> tuple[bytes, bytes | None]:
    log = folder / REVIEW_LOG
    return (folder / MANIFEST).read_bytes(), log.read_bytes() if log.exists() else None


async def test_filters_and_counts(folder):
    async with client(make_app(folder, None)) as c:
        async def ids(**query) -> list[str]:
            r = await c.get("/api/clips", params=query)
            assert r.status == 200, await r.text()
            return [x["id"] for x in (await r.json())["clips"]]

        assert await ids() == sorted(x.id for x in CLIPS)
        assert await ids(status=PALE) == ["film-0000-00", "film-0002-00"]
        assert await ids(status="captioned") == ["film-0000-01", "film-0001-00"]
        assert await ids(status="accepted") == []
        assert await ids(character="qiqi") == ["film-0000-01"]
        assert await ids(character="-") == ["film-0000-00", "film-0002-00"]
        assert await ids(level="5") == ["film-0002-00"]
        assert await ids(status="captioned", level="2") == ["film-0001-00"]
        assert await ids(offset="1", limit="2") == ["film-0000-01", "film-0001-00"]
        body = await (await c.get("/api/clips", params={"status": PALE})).json()
        assert body["total"] == 2
        assert body["counts"] == {"status": {"all": 4, PALE: 2, "captioned": 2, "accepted": 0, "rejected": 0},
                                  "character": {"qiqi": 1, "jiji": 1, "": 2},
                                  "level": {"1": 1, "2": 1, "3": 1, "4": 0, "5": 1}}
        clip = body["clips"][0]
        assert clip["issue"] == "no captioner configured"
        assert clip["media"] == {"clip": "/media/clips/film-0000-00.mp4", "reference": None,
                                 "stills": ["/media/stills/film-0000-00/0.jpg", "/media/stills/film-0000-00/1.jpg"]}
        for bad in ({"status": "done"}, {"character": "tombo"}, {"level": "6"}, {"limit": "9999"}, {"offset": "-1"}):
            r = await c.get("/api/clips", params=bad)
            assert r.status == 400, bad
            assert (await r.json())["error"] == "bad_request"


async def test_state_has_cast_and_vocabulary(folder):
    async with client(make_app(folder, None)) as c:
        state = await (await c.get("/api/state")).json()
    assert [(m["id"], m["name"], m["reference"]) for m in state["cast"]] == [
        ("qiqi", "Qiqi", "/media/references/qiqi.png"), ("jiji", "Jiji", "/media/references/jiji.png")]
    vocab = state["vocabulary"]
    # the manifest's own values first, then the catalogue film's suggestions (settings.json: qiqi)
    assert vocab["motion"][:3] == ["fly on broomstick", "run", "walk"]
    assert "deliver a parcel" in vocab["motion"] and vocab["motion"].count("walk") == 1
    assert vocab["background"][:3] == ["bakery", "sky", "street"]
    assert state["film"] == "qiqi" and state["film_suggestions"] is True and state["text_max"]["adverb"] == 30


@pytest.mark.parametrize("settings", [None, '{"film": "no-such-film"}', '{"film": null}', "not json"])
async def test_without_a_catalogue_film_the_manifest_alone_suggests(folder, settings):
    path = folder / "settings.json"
    path.unlink()
    if settings is not None:
        path.write_text(settings, encoding="utf-8")
    async with client(make_app(folder, None)) as c:
        state = await (await c.get("/api/state")).json()
    assert state["film_suggestions"] is False
    assert state["vocabulary"]["motion"] == ["fly on broomstick", "run", "walk"]
    assert state["vocabulary"]["time"] == ["day"]


async def test_a_valid_edit_is_saved_and_survives_a_new_app(folder):
    cid = "film-0000-00"
    async with client(make_app(folder, None)) as c:
        r = await post(c, cid, {"character": "Jiji ", "motion": "  sit   on railing", "background": "roof",
                                "social": 1, "entertainment": 0, "stamina": 1})
        assert r.status == 200, await r.text()
        body = await r.json()
        saved = body["clip"]
        # a name typed with spaces is cleaned like every stored text, then checked against the cast's ids
        assert (saved["character"], saved["motion"], saved["background"]) == ("jiji", "sit on railing", "roof")
        assert saved["status"] == PALE and saved["media"]["reference"] == "/media/references/jiji.png"
        r = await post(c, cid, {"status": "accepted"})
        assert r.status == 200, await r.text()
        body = await r.json()
        assert body["clip"]["status"] == "accepted" and body["clip"]["issue"] is None
        assert body["counts"]["status"]["accepted"] == 1
        assert body["games"] == "rebuilt"
    # on disk: two fsynced log lines, and the manifest rewritten with the edit
    lines = [json.loads(x) for x in (folder / REVIEW_LOG).read_text().splitlines()]
    assert lines == [{"id": cid, "character": "jiji", "motion": "sit on railing", "background": "roof", "social": 1,
                      "entertainment": 0, "stamina": 1}, {"id": cid, "status": "accepted"}]
    games = [json.loads(x) for x in (folder / "games.jsonl").read_text().splitlines()]
    assert [[t["clip"] for t in g["turns"]] for g in games] == [[cid]]
    assert "Jiji" in games[0]["turns"][0]["instruction"] and "sit on railing" in games[0]["turns"][0]["instruction"]
    on_disk = {x.id: x for x in read_manifest(folder)}[cid]
    assert (on_disk.status, on_disk.character, on_disk.motion, on_disk.issue) == ("accepted", "jiji", "sit on railing", None)
    async with client(make_app(folder, None)) as c:
        accepted = await (await c.get("/api/clips", params={"status": "accepted"})).json()
        assert [x["id"] for x in accepted["clips"]] == [cid]
        assert accepted["clips"][0]["stamina"] == 1
        # a cleared optional field is None again
        r = await post(c, "film-0000-01", {"adverb": "   "})
        assert (await r.json())["clip"]["adverb"] is None


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"character": "tombo"}, "character", "not in the cast"),
    ({"character": ["qiqi"]}, "character", "not text"),
    ({"motion": {"en": "run"}}, "motion", "not text"),
    ({"motion": "fly <frame_00001> away"}, "motion", "reserved model token"),
    ({"background": "sky</s>"}, "background", "reserved model token"),
    ({"adverb": "x" * 31}, "adverb", "longer than 30"),
    ({"motion": "m" * 81}, "motion", "longer than 80"),
    ({"social": 2}, "social", "is not one of"),
    ({"stamina": 0}, "stamina", "is not one of"),
    ({"entertainment": True}, "entertainment", "is not one of"),
    ({"status": "done"}, "status", "is not one of"),
    ({"caption_level": 9}, "caption_level", "not a level"),
    ({"motion_level": 5}, "", "not an editable field"),
    ({"clip": "../../etc/passwd"}, "", "not an editable field"),
    ({"status": "accepted"}, "character", "needed for an accepted clip"),
    ({"status": "accepted", "character": "qiqi", "motion": "run", "background": "sky", "social": 0, "stamina": 1},
     "entertainment", "needed for an accepted clip"),
    ({}, "", "nothing to change"),
])
async def test_bad_edits_are_refused_and_change_nothing(folder, changes, field, words):
    before = snapshot(folder)
    async with client(make_app(folder, None)) as c:
        r = await post(c, "film-0000-00", changes)
        assert r.status == 400
        body = await r.json()
        assert body["error"] == "invalid"
        assert any(p["field"] == field and words in p["message"] for p in body["problems"]), body
        clip = (await (await c.get("/api/clips/film-0000-00")).json())["clip"]
        assert clip["status"] == PALE and clip["character"] is None
    assert snapshot(folder) == before


async def test_malformed_bodies_are_refused(folder):
    before = snapshot(folder)
    async with client(make_app(folder, None)) as c:
        for data, ctype, status in (("[1, 2]", "application/json", 400), ("{not json", "application/json", 400),
                                    ('{"status": "accepted"}', "text/plain", 415),
                                    ("{" + '"a":1,' * 5000 + '"b":2}', "application/json", 413)):
            r = await c.post("/api/clips/film-0000-01", data=data, headers={"Origin": c.origin, "Content-Type": ctype})
            assert r.status == status, (data[:20], await r.text())
            assert "message" in await r.json()
        assert (await post(c, "no-such-clip", {"status": "accepted"})).status == 404
    assert snapshot(folder) == before


async def test_a_torn_last_line_is_ignored_and_later_edits_are_kept(folder):
    (folder / REVIEW_LOG).write_text('{"id":"film-0000-01","status":"accepted"}\n{"id":"film-0000-01","status":"rej',
                                     encoding="utf-8")
    async with client(make_app(folder, None)) as c:
        clip = (await (await c.get("/api/clips/film-0000-01")).json())["clip"]
        assert clip["status"] == "accepted"  # the whole line counts, the torn one does not
        r = await post(c, "film-0000-01", {"motion": "land"})
        assert r.status == 200 and (await r.json())["clip"]["motion"] == "land"
    clips = {x.id: x for x in read_manifest(folder)}
    assert (clips["film-0000-01"].status, clips["film-0000-01"].motion) == ("accepted", "land")
    async with client(make_app(folder, None)) as c:
        assert (await (await c.get("/api/clips/film-0000-01")).json())["clip"]["motion"] == "land"


async def test_a_manifest_behind_the_log_is_mended_at_start(folder):
    (folder / REVIEW_LOG).write_text('{"id":"film-0001-00","status":"rejected"}\n', encoding="utf-8")
    make_app(folder, None)  # a crash came after the log's line, before the manifest's rewrite
    assert {x.id: x.status for x in read_manifest(folder)}["film-0001-00"] == "rejected"


async def test_media_from_the_folder_only(folder):
    (folder.parent / "secret.txt").write_text("secret", encoding="utf-8")
    async with client(make_app(folder, None)) as c:
        r = await c.get("/media/clips/film-0000-01.mp4")
        assert r.status == 200 and r.content_type == "video/mp4"
        size = len(await r.read())
        assert r.headers["Accept-Ranges"] == "bytes"
        r = await c.get("/media/clips/film-0000-01.mp4", headers={"Range": "bytes=100-199"})
        assert r.status == 206 and r.headers["Content-Range"] == f"bytes 100-199/{size}" and len(await r.read()) == 100
        r = await c.get("/media/stills/film-0000-01/1.jpg")
        assert r.status == 200 and r.content_type == "image/jpeg" and (await r.read())[:2] == b"\xff\xd8"
        r = await c.get("/media/references/qiqi.png")
        assert r.status == 200 and r.content_type == "image/png"
        for path in ("/media/../secret.txt", "/media/%2e%2e/secret.txt", "/media/clips/%2e%2e/%2e%2e/secret.txt",
                     "/media/..%2fsecret.txt", "/media/%2Fetc%2Fpasswd", "/media//etc/passwd", "/media/manifest.jsonl",
                     "/media/cast.json", "/media/settings.json", "/static/../manifest.jsonl",
                     "/static/%2e%2e/%2e%2e/manifest.jsonl"):
            status, body = await raw_get(c.port, path)
            assert status in (403, 404), (path, status)
            assert b"secret" not in body and b"film-0000" not in body, path


async def test_every_answer_carries_the_security_headers(folder):
    async with client(make_app(folder, None)) as c:
        for path in ("/", "/static/review.js", "/api/state", "/media/references/jiji.png", "/nothing"):
            r = await c.get(path)
            assert "script-src 'self'" in r.headers["Content-Security-Policy"], path
            assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["Referrer-Policy"] == "no-referrer"
        assert (await c.get("/")).content_type == "text/html"


async def test_other_sites_are_refused_on_loopback(folder):
    before = snapshot(folder)
    async with client(make_app(folder, None)) as c:
        assert (await c.get("/api/state")).status == 200
        assert (await c.get("/api/state", headers={"Host": f"localhost:{c.port}"})).status == 200
        for headers in ({"Host": f"evil.example:{c.port}"}, {"Host": f"10.1.2.3:{c.port}"},
                        {"Host": f"127.0.0.1:{c.port + 1}"}, {"Origin": "http://evil.example"},
                        {"Origin": f"http://localhost:{c.port + 1}"}):
            r = await c.get("/api/state", headers=headers)
            assert r.status == 403, headers
            assert (await r.json())["error"] == "forbidden"
        r = await c.post("/api/clips/film-0000-01", data='{"status": "rejected"}',
                         headers={"Content-Type": "application/json"})  # no Origin: not the page's
        assert r.status == 403
        assert (await post(c, "film-0000-01", {"status": "rejected"}, Origin="http://evil.example")).status == 403
    assert snapshot(folder) == before


async def test_beyond_loopback_every_request_needs_the_token(folder):
    with pytest.raises(ValueError, match="token"):
        make_app(folder, None, host="0.0.0.0")
    # served on every interface: any address of the machine names it, but only with the token
    async with client(make_app(folder, TOKEN, host="0.0.0.0")) as c:
        lan = f"10.9.8.7:{c.port}"
        for headers in ({"Host": lan}, {"Host": lan, "Authorization": "Bearer wrong"}, {}):
            r = await c.get("/api/state", headers=headers)
            assert r.status == 403 and (await r.json())["error"] == "token_required", headers
        r = await c.get("/", params={"token": TOKEN}, headers={"Host": lan})
        assert r.status == 200
        cookie = r.cookies[f"animegamer-review-token-{c.port}"]
        assert cookie.value == TOKEN and cookie["httponly"] and cookie["samesite"] == "Strict"
        r = await c.get("/api/state", headers={"Host": lan})  # the cookie jar now carries it
        assert r.status == 200
        c.session.cookie_jar.clear()
        r = await post(c, "film-0000-01", {"status": "accepted"}, Host=lan, Origin=f"http://{lan}")
        assert r.status == 403
        r = await post(c, "film-0000-01", {"status": "accepted"}, Host=lan, Origin=f"http://{lan}",
                       Authorization=f"Bearer {TOKEN}")
        assert r.status == 200, await r.text()
        r = await post(c, "film-0000-01", {"status": "rejected"}, Host=lan, Origin="http://evil.example",
                       Authorization=f"Bearer {TOKEN}")
        assert r.status == 403  # the token does not lift the origin rule


def test_serve_refuses_the_network_without_a_token(folder, capsys):
    assert serve(folder, "0.0.0.0", 0, None) == 2
    err = capsys.readouterr().err
    assert "without a token" in err and "127.0.0.1" in err
    assert serve(folder.parent / "nothing-here", "127.0.0.1", 0, None) == 2
    assert "manifest.jsonl" in capsys.readouterr().err


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_serve_prints_its_url_and_stops_on_ctrl_c_or_sigterm(folder, stop):
    import urllib.request

    code = f"import sys; from pathlib import Path; from film.review import serve; sys.exit(serve(Path({str(folder)!r}), '127.0.0.1', 0, None))"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("AnimeGamer review page: http://127.0.0.1:"), (line, proc.stderr and proc.stderr.read())
        url = line.split(": ", 1)[1].strip()
        with urllib.request.urlopen(url + "api/state", timeout=10) as r:
            assert json.load(r)["folder"] == "prepared"
        os.kill(proc.pid, stop)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
