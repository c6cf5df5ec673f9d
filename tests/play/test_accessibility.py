"""The play page passes axe-core (WCAG 2 A/AA and best practices, tests/axe.py) with no violation in
each of its main states, in headless Chromium on the real `animegamer play` (its worker
subprocess, the preview backend): before any game, a game with a finished turn, a refusal shown,
paused, and in vote mode with a proposal."""

from __future__ import annotations

import pytest
from playwright.async_api import async_playwright

from tests.axe import violations
from tests.play.helpers import ARTIFACTS, running_play
from tests.play.test_browser import CHROMIUM, CHROMIUM_ARGS, act, join, open_tab, wait_done

pytestmark = pytest.mark.browser


@pytest.fixture
def play(tmp_path):
    with running_play(tmp_path / "data", "agaxe", "--preview-size", "240x160") as (proc, _):
        yield proc


async def test_the_page_has_no_axe_violation_in_its_main_states(play):
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    found: dict[str, list[str]] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await open_tab(await browser.new_context(viewport={"width": 1280, "height": 1000}), play.url, errors)
            await page.wait_for_selector("#you-hint:not([hidden])")  # no game yet
            found["start"] = await violations(page)

            await page.click("#start-button")
            await join(page, "Ann", "qiqi")
            await act(page, "fly on broomstick", "sky", adverb="quickly", time="night")
            await wait_done(page, 1)
            await page.wait_for_selector('article.turn[data-seq="1"] .turn-bars .bar')
            found["a turn"] = await violations(page)

            await act(page, "<TURN>", "sky")  # nothing usable is left: the game's refusal
            await page.wait_for_selector("#toast:not([hidden])")
            found["an error"] = await violations(page)

            await page.click("#pause-button")
            await page.wait_for_selector("#session-status.paused")
            found["paused"] = await violations(page)
            await page.click("#pause-button")
            await page.wait_for_selector("#session-status.active")

            await page.click("#setup summary")
            await page.check("#vote-enabled")
            await page.wait_for_selector("#vote:not([hidden])")
            await page.fill("#act-motion", "walk")
            await page.fill("#act-background", "town")
            await page.click("#vote-propose")
            await page.wait_for_selector('#vote-options li[data-number="1"]')
            found["vote"] = await violations(page)
            await page.screenshot(path=str(ARTIFACTS / "play-accessibility-vote.png"), full_page=True)
        finally:
            await browser.close()
    assert found == {state: [] for state in found}, found
    assert errors == [], errors
