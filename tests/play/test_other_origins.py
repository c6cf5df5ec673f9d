"""Headless Chromium proves the play page obeys only itself: a page served from another origin
(another port of 127.0.0.1), and a page reached through a DNS name re-pointed at 127.0.0.1 (DNS
rebinding, simulated with Chromium's --host-resolver-rules), try every way a browser offers to
pause, reset, act and read the game. None changes anything; the page itself still can."""

from __future__ import annotations

import contextlib

import pytest
from aiohttp import web
from playwright.async_api import async_playwright
from sqlalchemy import select

from db.models import GameSession, Turn
from tests.play.conftest import free_port, running_app
from tests.play.test_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.browser

A = 1111

# Runs in the attacker's page; TARGET is the play page's origin. Each attempt records what the
# attacker could observe; none may have an effect on the game.
ATTACK = """
async (TARGET) => {
  const out = {};
  const tryit = async (name, fn) => {
    try { out[name] = await fn(); } catch (e) { out[name] = 'blocked: ' + e.name; }
  };
  const body = JSON.stringify({paused: true});
  // "Simple" requests need no preflight: the classic CSRF.
  await tryit('pause text/plain', () => fetch(TARGET + '/api/pause', {method: 'POST', mode: 'no-cors', body,
    headers: {'Content-Type': 'text/plain'}}).then(r => 'sent, opaque ' + r.type));
  await tryit('reset bodiless', () => fetch(TARGET + '/api/reset', {method: 'POST', mode: 'no-cors'}).then(r => 'sent, opaque ' + r.type));
  await tryit('start form-encoded', () => fetch(TARGET + '/api/start', {method: 'POST', mode: 'no-cors',
    body: new URLSearchParams({a: '1'})}).then(r => 'sent, opaque ' + r.type));
  await tryit('beacon pause', async () => navigator.sendBeacon(TARGET + '/api/pause', new Blob([body], {type: 'text/plain'})));
  // A JSON body needs a preflight, which the page does not grant.
  await tryit('act json', () => fetch(TARGET + '/api/act', {method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({player_id: PLAYER_ID, motion: 'walk', background: 'town'})}).then(r => r.status));
  // Reading the game: CORS keeps the answer from the attacker.
  await tryit('read state', () => fetch(TARGET + '/api/state').then(r => r.text()));
  // A form posted into a hidden frame (a top-level navigation would do the same).
  await tryit('form reset', () => new Promise((resolve) => {
    const frame = document.createElement('iframe');
    frame.name = 'sink';
    frame.onload = () => resolve('submitted');
    document.body.append(frame);
    const form = document.createElement('form');
    form.method = 'POST'; form.action = TARGET + '/api/reset'; form.target = 'sink'; form.enctype = 'text/plain';
    const input = document.createElement('input');
    input.name = '{"a":"'; input.value = '"}';
    form.append(input); document.body.append(form); form.submit();
    setTimeout(() => resolve('timed out'), 5000);
  }));
  await new Promise(r => setTimeout(r, 500));  // let the beacon go out
  return out;
}
""".replace("PLAYER_ID", str(A))


@contextlib.asynccontextmanager
async def attacker_site():
    """Another origin: an empty page on another port."""
    async def cats(request: web.Request) -> web.Response:
        return web.Response(text="<!doctype html><title>cute cats</title><body></body>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", cats)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def game_state(sessions):
    async with sessions() as s:
        return [(g.id, g.status) for g in (await s.scalars(select(GameSession).order_by(GameSession.id))).all()], \
            len((await s.scalars(select(Turn))).all())


async def test_other_origins_cannot_pause_reset_or_act(settings, engine, database_url, sessions, http):
    async with running_app(settings, engine, database_url) as (base, _), attacker_site() as evil:
        assert (await http.post(f"{base}/api/start", json={})).status == 200
        assert (await http.post(f"{base}/api/join", json={"player_id": A, "name": "Ann", "character": "qiqi"})).status == 200
        before = await game_state(sessions)
        assert before[0][0][1] == "active" and before[1] == 0

        port = base.rsplit(":", 1)[1]
        args = [*CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.example.com 127.0.0.1"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=args)
            try:
                page = await (await browser.new_context()).new_page()

                # 1. Cross-site request forgery from a page of another origin.
                await page.goto(evil)
                seen = await page.evaluate(ATTACK, base)
                assert seen["act json"].startswith("blocked"), seen  # the preflight was refused
                assert seen["read state"].startswith("blocked"), seen  # the answer is not readable
                assert await game_state(sessions) == before, seen

                # 2. DNS rebinding: evil.example.com now resolves to the play page's address.
                rebound = f"http://evil.example.com:{port}"
                r = await page.goto(rebound + "/")
                assert r.status == 403 and "answers only to its own address" in await page.content()
                seen = await page.evaluate(ATTACK, rebound)  # "same-origin" for the browser, not for the page
                for name in ("act json", "read state"):
                    assert seen[name] in (403, "blocked: TypeError") or "forbidden" in str(seen[name]), seen
                assert await game_state(sessions) == before, seen

                # 3. The page itself still acts: its own fetch pauses the game.
                await page.goto(base + "/")
                status = await page.evaluate("""() => fetch('/api/pause', {method: 'POST',
                    headers: {'Content-Type': 'application/json'}, body: JSON.stringify({paused: true})}).then(r => r.status)""")
                assert status == 200
            finally:
                await browser.close()
        after = await game_state(sessions)
        assert after == ([(before[0][0][0], "paused")], 0)
