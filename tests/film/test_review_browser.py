"""The review page in headless Chromium on a folder the tests make: a clip plays, fields are edited
with the vocabulary's autocomplete, a refused edit shows its message by its field, clips are
accepted, rejected and reopened with the keyboard, and after a reload the edit and the status are
kept and the filter shows the clip under accepted. axe-core finds no violation in any of these
states (the list, a clip open, an edit refused, the shortcuts dialog, an empty filter)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from pathlib import Path

import pytest
from aiohttp import web
from playwright.async_api import async_playwright

from film.manifest import read_manifest
from film.review import make_app
from tests.axe import violations
from tests.film.test_review_api import build_folder
from tests.ports import free_port

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium")  # Debian's; None: Playwright's own
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--autoplay-policy=no-user-gesture-required",
]
SCREENSHOT = Path("/tmp/review-page.png")  # looked at by hand; not an artifact of the suite
VIDEO_READY = """async () => {
  const v = document.getElementById('clip-video');
  const t0 = performance.now();
  while ((v.readyState < 2 || v.videoWidth === 0) && performance.now() - t0 < 15000) await new Promise(r => setTimeout(r, 50));
  return {readyState: v.readyState, width: v.videoWidth, height: v.videoHeight, error: v.error && v.error.code};
}"""


SAVED_STATES = """async (id) => {
  const c = (await (await fetch('/api/clips/' + id)).json()).clip;
  return c.social === 0 && c.entertainment === 1 && c.stamina === 1;
}"""


@contextlib.asynccontextmanager
async def served(folder: Path):
    runner = web.AppRunner(make_app(folder, None), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        await runner.cleanup()


async def until(page, expression: str, arg=None, timeout: float = 15) -> None:
    """Poll an expression with page.evaluate (Playwright's wait_for_function evaluates strings in
    the page, which the page's CSP rightly forbids)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await page.evaluate(expression, arg):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not true within {timeout} s: {expression}")
        await asyncio.sleep(0.05)  # sleep: until()'s poll interval (the CSP forbids Playwright's wait_for_function)


async def saved(page, clip_id: str) -> None:
    await until(page, "(id) => document.getElementById('save-state').textContent.startsWith('Saved ' + id)", clip_id)


async def clear_save_state(page) -> None:
    await page.evaluate("document.getElementById('save-state').textContent = ''")


async def test_edit_accept_reload_and_filter(tmp_path):
    # long: one reviewer's session in one browser: edit, accept, reload, filter, each on the last's state
    folder = build_folder(tmp_path / "prepared")
    cid = "film-0000-00"  # needs review, nothing captioned
    problems: list[str] = []
    async with served(folder) as url, async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            await page.goto(url)
            await page.wait_for_selector("body[data-ready='1']")

            # the list, with the first clip open and playing
            assert await page.locator(".clip-row").count() == 4
            assert await page.text_content("#clip-title") == f"Clip {cid}"
            assert await page.text_content("[data-count='needs_review']") == "2"
            video = await page.evaluate(VIDEO_READY)
            assert video["readyState"] >= 2 and (video["width"], video["height"]) == (240, 160), video
            assert await page.locator("#stills img").count() == 2
            assert await violations(page) == []

            # the autocomplete offers the manifest's values and the film's suggestions
            motions = await page.eval_on_selector_all("#dl-motion option", "os => os.map(o => o.value)")
            assert motions[:3] == ["fly on broomstick", "run", "walk"] and "deliver a parcel" in motions
            assert await page.get_attribute("#f-motion", "list") == "dl-motion"
            assert await page.eval_on_selector_all("#dl-character option", "os => os.map(o => o.label)") == ["Qiqi", "Jiji"]

            # a refused edit: its message next to its field, nothing saved
            await page.fill("#f-character", "tombo")
            await page.press("#f-character", "Tab")
            await until(page, "() => document.getElementById('err-character').textContent.includes('not in the cast')")
            assert await page.get_attribute("#f-character", "aria-invalid") == "true"
            assert await violations(page) == []

            # edits, each saved on change; shortcuts do not fire while typing ("a", "r", "j" typed here)
            await page.fill("#f-character", "Qiqi")  # a name becomes its id
            await page.press("#f-character", "Tab")
            await saved(page, cid)
            assert await page.input_value("#f-character") == "qiqi"
            assert await page.get_attribute("#f-character", "aria-invalid") is None
            await clear_save_state(page)
            await page.locator("#f-motion").press_sequentially("deliver a parcel")
            await page.press("#f-motion", "Escape")  # leaves the field: saved
            await saved(page, cid)
            await clear_save_state(page)
            await page.fill("#f-background", "jam bakery")
            await page.select_option("#f-social", "0")
            await page.select_option("#f-entertainment", "1")
            await page.select_option("#f-stamina", "1")
            await until(page, SAVED_STATES, cid)
            assert await page.text_content("#clip-status") == "needs review"
            assert await page.get_attribute("#reference-img", "alt") == "Reference image of Qiqi"

            # accepted with "a" (the cursor in no field), which moves on to the next clip
            await page.locator("#clip-title").click()
            await clear_save_state(page)
            await page.keyboard.press("a")
            await saved(page, cid)
            await until(page, "() => document.getElementById('clip-title').textContent === 'Clip film-0000-01'")

            # the help dialog
            await page.keyboard.press("?")
            assert await page.locator("#help").is_visible()
            assert await violations(page) == []
            await page.keyboard.press("Escape")

            # e: into the first field; Esc: back out; j/k: next/previous; r: reject and move on; a refused
            # accept (no character yet) says so by the field and stays; u: back to needs review
            await page.keyboard.press("e")
            assert await page.evaluate("document.activeElement.id") == "f-character"
            await page.keyboard.press("Escape")
            await page.keyboard.press("j")
            await clear_save_state(page)
            await page.keyboard.press("r")
            await saved(page, "film-0001-00")
            await until(page, "() => document.getElementById('clip-title').textContent === 'Clip film-0002-00'")
            await page.keyboard.press("a")
            await until(page, "() => document.getElementById('err-character').textContent.includes('needed for an accepted clip')")
            assert await page.text_content("#clip-title") == "Clip film-0002-00"
            assert await violations(page) == []
            await page.keyboard.press("k")
            await until(page, "() => document.getElementById('clip-status').textContent === 'rejected'")
            await clear_save_state(page)
            await page.keyboard.press("u")
            await saved(page, "film-0001-00")
            assert await page.text_content("#clip-status") == "needs review"
            await page.keyboard.press("k")

            # a reload keeps everything; "k" goes back to the accepted clip
            await page.reload()
            await page.wait_for_selector("body[data-ready='1']")
            assert await page.text_content("#clip-title") == "Clip film-0000-01"
            await page.keyboard.press("k")
            await until(page, f"() => document.getElementById('clip-title').textContent === 'Clip {cid}'")
            assert await page.text_content("#clip-status") == "accepted"
            assert [await page.input_value(f"#f-{f}") for f in ("character", "motion", "background", "stamina")] == [
                "qiqi", "deliver a parcel", "jam bakery", "1"]

            # the accepted filter shows it, and only it
            await page.check("input[name=status][value=accepted]")
            await until(page, "() => document.querySelectorAll('.clip-row').length === 1")
            assert await page.get_attribute(".clip-row", "data-id") == cid
            assert await page.text_content("[data-count='accepted']") == "1"
            assert await page.text_content("[data-count='needs_review']") == "2"
            assert "status=accepted" in page.url
            await page.screenshot(path=str(SCREENSHOT))

            # an empty filter, the list only
            await page.check("input[name=status][value=rejected]")
            await page.wait_for_selector("#empty:not([hidden])")
            assert await violations(page) == []
        finally:
            await browser.close()
    # no script error, no CSP refusal: only Chromium's line for each refused edit's answer
    assert problems == ["Failed to load resource: the server responded with a status of 400 (Bad Request)"] * 2
    clip = {c.id: c for c in read_manifest(folder)}[cid]
    assert (clip.status, clip.character, clip.motion, clip.background, clip.stamina) == (
        "accepted", "qiqi", "deliver a parcel", "jam bakery", 1)
