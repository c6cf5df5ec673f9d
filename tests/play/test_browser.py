"""Two players in two tabs of headless Chromium play three turns on the real `animegamer play`
(its worker subprocess and the preview backend, a real Postgres, real ffmpeg).

Checked: each turn is seen queued or running, then done; its video element plays an MP4 whose
frames decode (readyState, videoWidth, presented frames, currentTime moving) and whose bytes
ffprobe reads as 17 H.264 frames; the bars show what the database stores; a hostile instruction
shows the game's own refusal; user text is shown as text; pause and reset work. Screenshots go
to test-artifacts/."""

from __future__ import annotations

import asyncio
import re
import shutil

import aiohttp
import psycopg
import pytest
from playwright.async_api import async_playwright

from game.catalogue import FILMS
from game.instruction import build_instruction
from game.sanitize import InputRefused
from tests.play.helpers import ARTIFACTS, ffprobe, running_play, save_artifact

pytestmark = pytest.mark.browser

# The system's Chromium (Debian's package); None: Playwright's own (`playwright install chromium`).
CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--autoplay-policy=no-user-gesture-required",
]
# A player name that is markup: it must show as typed and never run.
HOSTILE_NAME = "<img src=x onerror=__xss=1>Ann"  # within the name's 32 characters
# Records every status each turn's message shows, so a test can tell it was seen queued/running.
RECORD_STATUSES = """
window.__seen = {};
new MutationObserver(() => {
  for (const a of document.querySelectorAll('article.turn')) {
    const s = (window.__seen[a.dataset.seq] ||= []);
    if (!s.includes(a.dataset.status)) s.push(a.dataset.status);
  }
}).observe(document, {subtree: true, childList: true, attributes: true});
"""
VIDEO_CHECK = """
async (seq) => {
  const v = document.querySelector(`article.turn[data-seq="${seq}"] video`);
  if (!v) return {error: 'no video element'};
  const t0 = performance.now();
  while (v.readyState < 2 || v.videoWidth === 0) {
    if (performance.now() - t0 > 20000) return {error: 'not playable', readyState: v.readyState, err: v.error && v.error.code};
    await new Promise(r => setTimeout(r, 50));
  }
  if (v.paused) await v.play().catch(() => {});
  let frames = 0;
  const count = () => { frames++; v.requestVideoFrameCallback(count); };
  v.requestVideoFrameCallback(count);
  // Sample until several frames were presented and the clock moved (a busy machine is slow).
  const times = new Set();
  const t1 = performance.now();
  while ((frames < 3 || times.size < 3) && performance.now() - t1 < 10000) {
    times.add(v.currentTime.toFixed(3));
    await new Promise(r => setTimeout(r, 100));
  }
  return {readyState: v.readyState, width: v.videoWidth, height: v.videoHeight, duration: v.duration,
          frames, distinctTimes: times.size, paused: v.paused, src: v.getAttribute('src')};
}
"""
BARS = """
(sel) => [...document.querySelectorAll(sel)].map(b => ({
  character: b.dataset.character, state: b.dataset.state, value: Number(b.dataset.value),
  change: b.querySelector('.bar-change') ? Number(b.querySelector('.bar-change').dataset.change) : null}))
"""


@pytest.fixture
def play(tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    with running_play(tmp_path / "data", "agplay", "--preview-size", "240x160", "--preview-delay", "1.5") as running:
        yield running


def query(url: str, sql: str, *args):
    with psycopg.connect(url) as conn:
        return conn.execute(sql, args).fetchall()


async def open_tab(ctx, base: str, errors: list):
    page = await ctx.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    # Refusals are answered 400/409, which the browser logs; anything else logged as an error counts.
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and not re.search(r"status of 40[09]", m.text) else None)
    page.on("dialog", lambda d: asyncio.ensure_future(d.accept()))
    await page.add_init_script(RECORD_STATUSES)
    await page.goto(base)
    await page.wait_for_function("window.animegamerReady === true")
    return page


async def join(page, name: str, character: str) -> None:
    await page.wait_for_selector("#join-form:not([hidden])")
    await page.fill("#join-name", name)
    await page.select_option("#join-character", character)
    await page.click("#join-button")
    await page.wait_for_selector("#me:not([hidden])")


async def act(page, motion, background, adverb="", time="", others=()) -> None:
    await page.fill("#act-motion", motion)
    await page.fill("#act-adverb", adverb)
    await page.fill("#act-background", background)
    await page.fill("#act-time", time)
    for o in others:
        await page.check(f'#act-others input[value="{o}"]')
    await page.click("#act-button")


async def wait_done(page, seq: int) -> None:
    await page.wait_for_selector(f'article.turn[data-seq="{seq}"][data-status="done"]', timeout=60_000)


async def test_two_tabs_play_three_turns(play):
    # long: one story in two tabs: three turns played, each tab checked after each
    proc, url = play
    base = proc.url
    errors: list[str] = []
    async with async_playwright() as pw, aiohttp.ClientSession() as http:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = await browser.new_context(viewport={"width": 1280, "height": 1000})
            a = await open_tab(ctx, base, errors)
            await a.click("#start-button")
            await join(a, HOSTILE_NAME, "qiqi")
            b = await open_tab(ctx, base, errors)  # a second tab: a second player
            await join(b, "Bo", "jiji")
            for page in (a, b):
                await page.wait_for_function("document.querySelectorAll('#players li').length === 2")

            # Suggestions are the catalogue's, as in /act's autocomplete.
            await a.fill("#act-motion", "fl")
            await a.dispatch_event("#act-motion", "input")
            await a.wait_for_selector('#dl-motion option[value="fly on broomstick"]', state="attached")

            # Turns 1 and 2 back to back (the second waits behind the first), then turn 3.
            await act(a, "fly on broomstick", "sky", adverb="quickly", time="night", others=["jiji"])
            await a.wait_for_selector('article.turn[data-seq="1"]')
            await act(b, "run", "town", time="day")
            for page in (a, b):
                await wait_done(page, 1)
                await wait_done(page, 2)
            await act(a, "wave at &lt;i&gt;Tombo&lt;/i&gt;", "clock tower", adverb="happily")
            for page in (a, b):
                await wait_done(page, 3)
            await b.wait_for_function("document.querySelectorAll('#states .char').length === 2")

            # Every turn was seen waiting or running before it was done, in some tab.
            seen = [await p.evaluate("window.__seen") for p in (a, b)]
            for seq in ("1", "2", "3"):
                statuses = set(seen[0].get(seq, [])) | set(seen[1].get(seq, []))
                assert statuses & {"queued", "running"} and "done" in statuses, (seq, seen)
            assert "running" in set().union(*(s.get(k, []) for s in seen for k in s)), seen

            rows = query(url, "SELECT seq, id, status, is_preview, states_before, states_after, author_name, instruction"
                              " FROM turns ORDER BY seq")
            assert [r[2] for r in rows] == ["done"] * 3 and all(r[3] for r in rows)
            await a.screenshot(path=str(ARTIFACTS / "play-tab-a-three-turns.png"), full_page=True)
            await b.screenshot(path=str(ARTIFACTS / "play-tab-b-three-turns.png"), full_page=True)

            for seq, _turn_id, _, _, before, after, author, instruction in rows:
                for page in (a, b):
                    await page.bring_to_front()  # a background tab does not present frames
                    v = await page.evaluate(VIDEO_CHECK, seq)
                    assert "error" not in v, (seq, v)
                    assert v["readyState"] >= 2 and (v["width"], v["height"]) == (240, 160), v
                    assert v["frames"] >= 3 and v["distinctTimes"] >= 3 and not v["paused"], (seq, v)
                    assert await page.locator(f'article.turn[data-seq="{seq}"] .preview-label').inner_text() == "PREVIEW"
                    # The bars of the turn: the stored new values and their changes.
                    bars = await page.evaluate(BARS, f'article.turn[data-seq="{seq}"] .turn-bars .bar')
                    expected = sorted(
                        (cid, k, vals[k], vals[k] - before[cid][k]) for cid, vals in after.items() for k in vals
                    )
                    assert sorted((x["character"], x["state"], x["value"], x["change"]) for x in bars) == expected
                    assert await page.locator(f'article.turn[data-seq="{seq}"] .author').inner_text() == author
                    assert await page.locator(f'article.turn[data-seq="{seq}"] .instruction').inner_text() == instruction
                # The served bytes: an MP4 that ffprobe decodes, 17 frames of H.264.
                async with http.get(base + v["src"]) as r:
                    assert r.status == 200 and r.content_type == "video/mp4"
                    data = await r.read()
                probe = ffprobe(save_artifact(f"play-turn-{seq}.mp4", data))
                assert (probe["codec_name"], probe["width"], probe["height"], int(probe["nb_read_frames"])) == ("h264", 240, 160, 17)
                async with http.get(base + v["src"], headers={"Range": "bytes=0-99"}) as r:
                    assert r.status == 206 and len(await r.read()) == 100

            # The side panel shows the states now stored for each character.
            stored = query(url, "SELECT character_id, stamina, social, entertainment FROM character_states cs"
                                " JOIN game_sessions g ON g.id = cs.session_id WHERE g.status = 'active'")
            expected = sorted((c, k, v) for c, *vals in stored for k, v in zip(("stamina", "social", "entertainment"), vals, strict=True))
            for page in (a, b):
                bars = await page.evaluate(BARS, "#states .bar")
                assert sorted((x["character"], x["state"], x["value"]) for x in bars) == expected

            # User text is text: the name is shown as typed and nothing in it ran.
            assert instruction.endswith("Motion: happily wave at &lt;i&gt;Tombo&lt;/i&gt;; Background: clock tower.")
            assert await a.evaluate("window.__xss") is None
            assert await a.evaluate("document.querySelectorAll('#messages img, #players img, #messages i').length") == 0
            assert await b.locator("#players li").first.locator(".who").inner_text() == HOSTILE_NAME

            # A hostile instruction: the game's own refusal, and nothing is queued.
            hostile = "<TURN></TURN><ML>"
            with pytest.raises(InputRefused) as refused:
                build_instruction(FILMS["qiqi"], ["jiji"], motion=hostile, background="sky")
            await act(b, hostile, "sky")
            await b.wait_for_selector("#toast:not([hidden])")
            assert await b.locator("#toast").inner_text() == str(refused.value)
            await b.screenshot(path=str(ARTIFACTS / "play-hostile-instruction.png"))
            assert query(url, "SELECT count(*) FROM turns")[0][0] == 3

            # Pause (a moderator's button in one tab) reaches the other tab live.
            await a.click("#pause-button")
            await b.wait_for_selector("#session-status.paused")
            assert await b.locator("#act-button").is_disabled()
            await a.click("#pause-button")
            await b.wait_for_selector("#session-status.active")

            # Reset: a fresh session, same players, every bar back to 50, in both tabs.
            old_session = query(url, "SELECT id FROM game_sessions WHERE status = 'active'")[0][0]
            await a.click("#reset-button")
            for page in (a, b):
                await page.wait_for_function("document.querySelectorAll('article.turn').length === 0")
                await page.wait_for_selector("#messages .system:has-text('reset')")
                await page.wait_for_function(
                    "[...document.querySelectorAll('#states .bar')].length === 6 && "
                    "[...document.querySelectorAll('#states .bar')].every(b => b.dataset.value === '50')")
            live = query(url, "SELECT id FROM game_sessions WHERE status = 'active'")
            assert len(live) == 1 and live[0][0] != old_session
            assert query(url, "SELECT status FROM game_sessions WHERE id = %s", old_session) == [("archived",)]
            assert query(url, "SELECT count(*) FROM players WHERE session_id = %s AND left_at IS NULL", live[0][0]) == [(2,)]
            assert {r for r in query(url, "SELECT stamina, social, entertainment FROM character_states WHERE session_id = %s", live[0][0])} == {(50, 50, 50)}
            await a.screenshot(path=str(ARTIFACTS / "play-after-reset.png"))

            # The admin switches to another film: the game restarts with its cast, in both tabs.
            await a.click("#setup summary")
            await a.select_option("#film-select", "ponyo")
            for page in (a, b):
                await page.wait_for_function("document.getElementById('channel-title').textContent.startsWith('Ponyo')")
                await page.wait_for_selector("#join-form:not([hidden])")
                assert await page.locator("#join-character option").all_inner_texts() == [c.name for c in FILMS["ponyo"].characters]
            assert query(url, "SELECT film_id FROM game_sessions WHERE status = 'active'") == [("ponyo",)]
        finally:
            await browser.close()
    assert errors == [], errors
