"""The play page's JSON API and event stream over a real Postgres, without a worker: turns stay
queued. Refusals must be the game's own messages (the same words Discord shows)."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlalchemy import select

from db.models import GameSession, Turn
from game import session_errors, turn_errors
from game.catalogue import FILMS
from game.instruction import build_instruction
from game.sanitize import InputRefused
from play.errors import PAGE_HINTS
from testkit.waits import wait_for
from tests.play.conftest import running_app

A, B = 1111, 2222


async def post(http, url, body=None):
    async with http.post(url, json=body or {}) as r:
        return r.status, await r.json()


async def get(http, url):
    async with http.get(url) as r:
        return r.status, await r.json()


@pytest.fixture
async def app(settings, engine, database_url, sessions):
    async with running_app(settings, engine, database_url) as (base, svc):
        yield base, svc


async def start_and_join(http, base):
    assert (await post(http, f"{base}/api/start"))[0] == 200
    assert (await post(http, f"{base}/api/join", {"player_id": A, "name": "Ann", "character": "qiqi"}))[0] == 200
    assert (await post(http, f"{base}/api/join", {"player_id": B, "name": "Bo", "character": "Jiji"}))[0] == 200


async def test_state_join_and_act(app, http, sessions):
    base, _ = app
    status, st = await get(http, f"{base}/api/state")
    assert status == 200 and st["session"] is None and st["config"]["film"] == "qiqi"
    await start_and_join(http, base)

    status, st = await get(http, f"{base}/api/state?player={A}")
    assert st["me"] == {"name": "Ann", "character": "qiqi"}
    assert [p["character_name"] for p in st["players"]] == ["Qiqi", "Jiji"]
    assert st["states"]["qiqi"]["stamina"] == 50

    status, r = await post(http, f"{base}/api/act", {
        "player_id": A, "motion": "fly on broomstick", "adverb": "quickly", "background": "sky",
        "time_of_day": "night", "characters": ["jiji"],
    })
    assert status == 200, r
    assert r["instruction"] == "Character: Qiqi, Jiji; Motion: quickly fly on broomstick; Background: night sky."
    status, listing = await get(http, f"{base}/api/turns")
    [t] = listing["turns"]
    assert (t["seq"], t["status"], t["author_name"], t["video"]) == (1, "queued", "Ann", None)
    assert [c["name"] for c in t["characters"]] == ["Qiqi", "Jiji"]
    async with sessions() as s:
        row = (await s.scalars(select(Turn))).one()
        assert row.instruction == r["instruction"] and row.author_id == A


async def test_suggestions_are_the_catalogue_ones(app, http):
    base, _ = app
    from game.catalogue import suggest

    status, items = await get(http, f"{base}/api/suggest?field=motion&q=fl")
    assert status == 200 and items == suggest(FILMS["qiqi"].motions, "fl") and items[0] == "fly on broomstick"
    status, items = await get(http, f"{base}/api/suggest?field=time_of_day&q=")
    assert items == list(FILMS["qiqi"].times)


async def test_refusals_are_the_games_messages(app, http):
    base, _ = app
    # No game yet.
    status, r = await post(http, f"{base}/api/join", {"player_id": A, "name": "Ann", "character": "qiqi"})
    assert (status, r["message"]) == (409, session_errors.NoSession().shown(PAGE_HINTS))
    await start_and_join(http, base)

    status, r = await post(http, f"{base}/api/join", {"player_id": 3333, "name": "Cy", "character": "qiqi"})
    assert (status, r["message"]) == (409, session_errors.CharacterTaken("Qiqi", "Ann").message)
    status, r = await post(http, f"{base}/api/join", {"player_id": 3333, "name": "Cy", "character": "Totoro"})
    assert r["error"] == "unknown_character" and "Totoro" in r["message"]
    status, r = await post(http, f"{base}/api/act", {"player_id": 3333, "motion": "walk", "background": "town"})
    assert (status, r["message"]) == (409, session_errors.NotJoined().shown(PAGE_HINTS))

    # A hostile instruction: only reserved model tokens. The message is the sanitiser's own.
    hostile = {"motion": "<TURN></TURN><ML>", "background": "sky"}
    with pytest.raises(InputRefused) as refused:
        build_instruction(FILMS["qiqi"], ["qiqi"], **hostile)
    status, r = await post(http, f"{base}/api/act", {"player_id": A, **hostile})
    assert (status, r["error"], r["field"], r["message"]) == (400, "input_refused", "motion", str(refused.value))
    status, r = await post(http, f"{base}/api/act", {"player_id": A, "motion": "walk", "background": "x" * 81})
    assert status == 400 and "too long" in r["message"]
    status, r = await post(http, f"{base}/api/join", {"player_id": 4444, "name": "  ", "character": "tombo"})
    assert status == 400 and r["field"] == "name"
    status, r = await post(http, f"{base}/api/act", {"player_id": "x", "motion": "walk", "background": "town"})
    assert status == 400 and r["field"] == "player_id"

    # Paused: the same refusal as /act in a paused channel, with the page's hint (its panel, not /mod resume).
    assert (await post(http, f"{base}/api/pause", {"paused": True}))[0] == 200
    status, r = await post(http, f"{base}/api/act", {"player_id": A, "motion": "walk", "background": "town"})
    assert (status, r["message"]) == (409, session_errors.SessionPaused("moderator").shown(PAGE_HINTS))
    assert r["message"] == "This game is paused (paused by a moderator). Resume it under Moderate."
    assert (r["error"], r["params"]) == ("paused", {"reason": "moderator"})  # the code and its values apart
    _, st = await get(http, f"{base}/api/state")
    assert (st["session"]["paused_reason"], st["session"]["paused_reason_code"]) == ("paused by a moderator", "moderator")
    assert (await post(http, f"{base}/api/pause", {"paused": False}))[0] == 200


async def test_backlog_and_cooldown(settings, engine, database_url, sessions, http):
    settings = settings.model_copy(update={"backlog_cap": 2, "cooldown_seconds": 30})
    async with running_app(settings, engine, database_url) as (base, _):
        await start_and_join(http, base)
        act = {"motion": "walk", "background": "town"}
        assert (await post(http, f"{base}/api/act", {"player_id": A, **act}))[0] == 200
        status, r = await post(http, f"{base}/api/act", {"player_id": A, **act})
        assert status == 409 and r["error"] == "cooldown" and r["message"].startswith("Slow down")
        assert (await post(http, f"{base}/api/act", {"player_id": B, **act}))[0] == 200
        assert (await post(http, f"{base}/api/join", {"player_id": 5, "name": "Cy", "character": "tombo"}))[0] == 200
        status, r = await post(http, f"{base}/api/act", {"player_id": 5, **act})
        assert (status, r["message"]) == (409, turn_errors.BacklogFull(2).message)


async def test_reset_and_film_change(app, http, sessions):
    base, _ = app
    await start_and_join(http, base)
    await post(http, f"{base}/api/act", {"player_id": A, "motion": "walk", "background": "town"})
    _, st = await get(http, f"{base}/api/state")
    old = st["session"]["id"]

    status, r = await post(http, f"{base}/api/reset")
    assert status == 200 and r["session_id"] != old
    _, st = await get(http, f"{base}/api/state?player={B}")
    assert st["session"]["id"] == r["session_id"] and st["me"]["character"] == "jiji"
    assert all(v["stamina"] == 50 for v in st["states"].values())
    _, listing = await get(http, f"{base}/api/turns")
    assert listing["turns"] == []
    async with sessions() as s:
        assert (await s.scalars(select(Turn.status))).all() == ["cancelled"]

    # Another film: the game restarts with that film's cast and nobody in it.
    status, r = await post(http, f"{base}/api/film", {"film": "ponyo"})
    assert status == 200
    _, st = await get(http, f"{base}/api/state")
    assert st["session"]["film"] == "ponyo" and st["players"] == [] and st["film"]["id"] == "ponyo"
    status, r = await post(http, f"{base}/api/film", {"film": "totoro"})
    assert r["error"] == "unknown_film"
    async with sessions() as s:
        live = (await s.scalars(select(GameSession).where(GameSession.status != "archived"))).all()
        assert [g.film_id for g in live] == ["ponyo"]


async def test_cast_setting_limits_joining(app, http):
    base, _ = app
    await post(http, f"{base}/api/start")
    assert (await post(http, f"{base}/api/cast", {"character": "tombo", "enabled": False}))[0] == 200
    _, st = await get(http, f"{base}/api/state")
    assert "tombo" not in st["config"]["playable"]
    status, r = await post(http, f"{base}/api/join", {"player_id": A, "name": "Ann", "character": "tombo"})
    assert status == 409 and r["error"] == "unknown_character"


async def test_events_stream_this_channels_notifications(app, http, sessions):
    base, _ = app
    await start_and_join(http, base)
    got: list[dict] = []

    async def read():
        async with http.get(f"{base}/api/events") as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            async for line in r.content:
                if line.startswith(b"data: "):
                    got.append(json.loads(line[6:]))
                    if got[-1]["type"] == "turn_queued":
                        return

    reader = asyncio.create_task(read())
    await wait_for(lambda: got, timeout=10, what="the stream's hello (its subscription is made)")
    # Another channel's NOTIFY (a Discord game) is not for this page.
    from db import notify

    async with sessions() as s, s.begin():
        await notify.notify(s, notify.SESSION_CHANGED, session_id=999, channel_id=424242, event="started")
    status, r = await post(http, f"{base}/api/act", {"player_id": A, "motion": "walk", "background": "town"})
    await asyncio.wait_for(reader, 10)
    types = [e["type"] for e in got]
    assert types[0] == "hello" and types[-1] == "turn_queued"
    assert got[-1]["turn_id"] == r["turn_id"]
    assert all(e.get("channel_id") in (None, 1) for e in got)


async def test_cancel_a_queued_turn(app, http, sessions):
    base, _ = app
    await start_and_join(http, base)
    _, r = await post(http, f"{base}/api/act", {"player_id": A, "motion": "walk", "background": "town"})
    status, _ = await post(http, f"{base}/api/turns/{r['turn_id']}/cancel")
    assert status == 200
    status, again = await post(http, f"{base}/api/turns/{r['turn_id']}/cancel")
    assert (status, again["message"]) == (409, turn_errors.TurnNotCancellable("cancelled").message)
    assert again["params"] == {"status": "cancelled"}
    _, t = await get(http, f"{base}/api/turns/{r['turn_id']}")
    assert (t["status"], t["error"], t["error_text"]) == ("cancelled", "cancelled_by_moderator", "cancelled by a moderator")
    async with http.get(f"{base}/api/turns/{r['turn_id']}/video.mp4") as v:
        assert v.status == 404


async def test_page_and_assets_are_served(app, http):
    base, _ = app
    async with http.get(base + "/") as r:
        html = await r.text()
        assert r.status == 200 and "/static/app.js" in html
    for asset in ("app.js", "style.css"):
        async with http.get(f"{base}/static/{asset}") as r:
            assert r.status == 200
    # The script never writes markup from data.
    from play.routes import STATIC

    js = (STATIC / "app.js").read_text()
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "outerHTML" not in js


async def test_history_pages_back(settings, engine, database_url, sessions, http):
    settings = settings.model_copy(update={"backlog_cap": 100})
    async with running_app(settings, engine, database_url) as (base, _):
        await start_and_join(http, base)
        for i in range(25):
            assert (await post(http, f"{base}/api/act", {"player_id": A, "motion": f"walk {i}", "background": "town"}))[0] == 200
        _, latest = await get(http, f"{base}/api/turns?limit=20")
        assert [t["seq"] for t in latest["turns"]] == list(range(6, 26)) and latest["more"]
        _, older = await get(http, f"{base}/api/turns?limit=20&before=6")
        assert [t["seq"] for t in older["turns"]] == list(range(1, 6)) and not older["more"]


async def test_regenerate_needs_a_finished_turn(app, http):
    base, _ = app
    await start_and_join(http, base)
    status, r = await post(http, f"{base}/api/regenerate")
    assert (status, r["message"]) == (409, turn_errors.NoTurnToRegenerate().message)
    await post(http, f"{base}/api/act", {"player_id": A, "motion": "walk", "background": "town"})
    status, r = await post(http, f"{base}/api/regenerate")
    assert (status, r["message"]) == (409, turn_errors.TurnNotFinished("queued").message)


async def test_healthz_says_whether_the_database_and_live_updates_are_up(app, http):
    """200 while the page reaches Postgres and its LISTEN connection is up; 503 in the JSON error
    format once live updates stop (here: the listener closed), so a supervisor can tell."""
    base, svc = app
    status, body = await get(http, f"{base}/healthz")
    assert status == 200 and body == {"status": "ok", "database": "up", "live_updates": "up"}
    await svc.hub.stop()
    status, body = await get(http, f"{base}/healthz")
    assert status == 503 and body["error"] == "service_down" and body["live_updates"] == "reconnecting"
    assert body["database"] == "up"
