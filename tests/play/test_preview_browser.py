"""Headless Chromium on the real `animegamer play` (its worker subprocess, the preview backend): a
turn shows a preview of its clip, through the event stream, in the place its video then takes."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import async_playwright

from tests.play.helpers import ARTIFACTS, running_play
from tests.play.test_browser import CHROMIUM, CHROMIUM_ARGS, VIDEO_CHECK, act, join, wait_done

pytestmark = pytest.mark.browser

# Records, for each turn, whether a loaded preview image was seen while the turn had no video.
RECORD_PREVIEWS = """
window.__previews = {};
new MutationObserver(() => {
  for (const a of document.querySelectorAll('article.turn')) {
    const img = a.querySelector('figure.clip.forming img.preview-still');
    if (img && !a.querySelector('video')) {
      const seen = (window.__previews[a.dataset.seq] ||= new Set());
      seen.add(img.getAttribute('src'));
    }
  }
}).observe(document, {subtree: true, childList: true, attributes: true});
"""
LOADED_PREVIEW = """(seq) => {
  const a = document.querySelector(`article.turn[data-seq="${seq}"]`);
  const img = a && a.querySelector('figure.clip.forming img.preview-still');
  return !!img && img.complete && img.naturalWidth > 0 && !a.querySelector('video') && a.dataset.status === 'running';
}"""


@pytest.fixture
def play(tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    # Previews as often as the worker makes them (the default waits 5 s between two).
    with running_play(tmp_path / "data", "agprev", "--preview-size", "240x160", "--preview-delay", "4",
                      ANIMEGAMER_PREVIEW_INTERVAL="0") as (proc, _):
        yield proc


async def test_preview_shows_in_the_turns_place_before_its_video(play):
    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = await browser.new_context(viewport={"width": 1000, "height": 900})
            page = await ctx.new_page()
            await page.add_init_script(RECORD_PREVIEWS)
            await _open(page, play.url, errors)
            await page.click("#start-button")
            await join(page, "Ann", "qiqi")
            await act(page, "fly on broomstick", "sky", adverb="quickly", time="night")
            await page.wait_for_function(LOADED_PREVIEW, arg=1, timeout=60_000)
            await page.screenshot(path=str(ARTIFACTS / "play-preview-forming.png"))
            size = await page.evaluate("""() => { const i = document.querySelector('article.turn[data-seq="1"] img.preview-still');
                                                   return [i.naturalWidth, i.naturalHeight, i.getAttribute('src').slice(0, 23)]; }""")
            assert size == [360, 240, "data:image/webp;base64,"], size
            await wait_done(page, 1)
            v = await page.evaluate(VIDEO_CHECK, 1)
            assert "error" not in v and v["frames"] >= 3, v
            # The video took the preview's place.
            assert await page.locator('article.turn[data-seq="1"] img.preview-still').count() == 0
            seen = await page.evaluate("Object.fromEntries(Object.entries(window.__previews).map(([k, s]) => [k, s.size]))")
            assert seen.get("1", 0) >= 1, seen
        finally:
            await browser.close()
    assert errors == [], errors


async def _open(page, base: str, errors: list) -> None:
    """As test_browser.open_tab, on a page that records previews."""
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and not re.search(r"status of 40[09]", m.text) else None)
    await page.goto(base)
    await page.wait_for_function("window.animegamerReady === true")
