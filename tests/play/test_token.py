"""The play page bound beyond loopback asks every request for the token printed at start, on
whichever address the request comes in on; bound to loopback it asks for none."""

from __future__ import annotations

import contextlib
import ipaddress
import urllib.error
import urllib.request

import aiohttp
import psutil
import pytest
from aiohttp import web

from db.engine import make_sessionmaker
from db.runtime import Database
from localweb.guard import needs_token
from play.app import make_runner
from play.events import EventHub
from play.page import PLAY_CHANNEL_ID, Page, ensure_film
from service.runtime import Store
from tests.play.helpers import PlayProcess, play_env
from tests.ports import free_port

TOKEN = "s3cret-Token_x"


def this_machines_addresses() -> list[str]:
    """127.0.0.1 and, when the machine has one, an address of another interface (IPv4)."""
    others = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
              if a.family.name == "AF_INET" and not ipaddress.ip_address(a.address).is_loopback]
    return ["127.0.0.1", *others[:1]]


@contextlib.asynccontextmanager
async def served_everywhere(settings, engine, database_url):
    """The page as `animegamer play --host 0.0.0.0` serves it, with a known token; yields its port."""
    store = Store(Database(url=database_url, engine=engine, sessions=make_sessionmaker(engine)))
    hub = EventHub(database_url, PLAY_CHANNEL_ID)
    await hub.start()
    svc = Page(settings=settings, store=store, hub=hub, use_queue=False, host="0.0.0.0")
    await ensure_film(svc)
    runner = make_runner(svc, shutdown_timeout=2, token=TOKEN)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    try:
        yield port
    finally:
        await runner.cleanup()
        await hub.stop()


def test_which_bindings_need_a_token():
    for bound in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert not needs_token(bound), bound
    for bound in ("0.0.0.0", "::", "192.168.1.20", "10.0.0.5", "fe80::1", "myhost.lan"):
        assert needs_token(bound), bound


async def test_beyond_loopback_every_request_needs_the_token(settings, engine, database_url, sessions):
    async with served_everywhere(settings, engine, database_url) as port, aiohttp.ClientSession() as http:
        for address in this_machines_addresses():
            base = f"http://{address}:{port}"
            origin = {"Origin": base}
            # Without the token (or with a wrong one): 403 with a JSON error naming what is missing.
            for path, kw in [("/", {}), ("/api/state", {}), ("/static/app.js", {}), ("/metrics", {}),
                             ("/api/state?token=wrong", {}), ("/api/state", {"headers": {"Authorization": "Bearer wrong"}})]:
                async with http.get(base + path, **kw) as r:
                    assert r.status == 403, (address, path)
                    body = await r.json()
                    assert body["error"] == "token_required" and "?token=" in body["message"], body
            async with http.post(f"{base}/api/start", json={}, headers=origin) as r:
                assert r.status == 403 and (await r.json())["error"] == "token_required"

            # The printed link: the page, and the token back as a cookie for its own requests.
            async with http.get(f"{base}/?token={TOKEN}") as r:
                assert r.status == 200 and "/static/app.js" in await r.text()
                cookie = r.cookies[f"animegamer-play-token-{port}"]
                assert cookie.value == TOKEN and cookie["httponly"] and cookie["samesite"] == "Strict"
            carried = {"Cookie": f"animegamer-play-token-{port}={TOKEN}"}
            async with http.get(f"{base}/api/state", headers=carried) as r:
                assert r.status == 200 and (await r.json())["config"]["film"] == "qiqi"
            async with http.get(f"{base}/static/app.js", headers=carried) as r:
                assert r.status == 200
            async with http.post(f"{base}/api/start", json={}, headers={**carried, **origin}) as r:
                assert r.status in (200, 409), await r.text()  # 409: started on the previous address
            # Tools (and Prometheus) send it as a bearer token.
            async with http.get(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}) as r:
                assert r.status == 200 and "play_" in await r.text()


def test_play_prints_the_link_with_its_token(tmp_path):
    """`animegamer play --host 0.0.0.0`: the printed URL carries the token; without it, 403."""
    page = PlayProcess(play_env(tmp_path / "data"), "--host", "0.0.0.0", "--no-worker")
    try:
        url = page.wait_ready()
        assert url.startswith(f"http://0.0.0.0:{page.port}/?token=")
        token = url.split("?token=", 1)[1]
        assert len(token) >= 32
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{page.url}/api/state", timeout=30)
        assert refused.value.code == 403
        with urllib.request.urlopen(f"{page.url}/api/state?token={token}", timeout=30) as r:
            assert r.status == 200
        assert "needs the token" in page.output
        assert page.interrupt() == 0  # Ctrl-C: the embedded Postgres stops with it
    finally:
        page.kill()


@pytest.mark.browser
async def test_the_page_carries_its_token_in_chromium(tmp_path):
    """The printed link opened in Chromium: the page's own fetches and its event stream carry the
    token (a turn is played and seen done); a reload without ?token still works; a browser that
    never had the link gets 403."""
    from playwright.async_api import async_playwright

    from testkit.pg import fresh_database
    from tests.play.test_browser import CHROMIUM, CHROMIUM_ARGS, act, join, open_tab, wait_done

    with fresh_database("agtoken") as url:
        page = PlayProcess(play_env(tmp_path / "data", DATABASE_URL=url), "--host", "0.0.0.0",
                           "--preview-size", "96x64", "--preview-delay", "0.5")
        try:
            link = page.wait_ready().replace("0.0.0.0", "127.0.0.1")
            errors: list[str] = []
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    tab = await open_tab(await browser.new_context(), link, errors)
                    await tab.click("#start-button")
                    await join(tab, "Ann", "qiqi")
                    await act(tab, "run", "town")
                    await wait_done(tab, 1)  # the turn's progress came through the event stream
                    await tab.goto(page.url + "/")  # the cookie, not the URL, carries the token now
                    await tab.wait_for_function("window.animegamerReady === true")
                    await tab.wait_for_selector('article.turn[data-seq="1"][data-status="done"]')
                    assert errors == [], errors

                    stranger = await (await browser.new_context()).new_page()
                    answer = await stranger.goto(page.url + "/")
                    assert answer is not None and answer.status == 403
                    assert (await answer.json())["error"] == "token_required"
                finally:
                    await browser.close()
            assert page.interrupt() == 0, page.output
        finally:
            page.kill()
