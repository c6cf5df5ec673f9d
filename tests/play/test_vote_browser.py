"""Vote mode in headless Chromium on the play page (served in-process over a real Postgres, no
worker: the winning turn stays queued): an admin turns it on, a tab that never joined and a
player each propose, both vote, and the player's vote closes the round into a turn."""

from __future__ import annotations

import pytest
from playwright.async_api import async_playwright
from sqlalchemy import select

from db.models import Turn
from tests.play.conftest import running_app
from tests.play.helpers import ARTIFACTS
from tests.play.test_browser import CHROMIUM, CHROMIUM_ARGS, join, open_tab

pytestmark = pytest.mark.browser

NAME = "<b>Cy</b>"  # markup in a name shows as text


async def propose(page, motion: str, background: str, others=()) -> None:
    await page.fill("#act-motion", motion)
    await page.fill("#act-background", background)
    for o in others:
        await page.check(f'#act-others input[value="{o}"]')
    await page.click("#vote-propose")


async def test_two_tabs_vote(settings, engine, database_url, sessions):
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    async with running_app(settings, engine, database_url) as (base, _), async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = await browser.new_context(viewport={"width": 1280, "height": 1000})
            a = await open_tab(ctx, base, errors)
            await a.click("#start-button")
            await join(a, "Ann", "qiqi")
            await a.click("#setup summary")
            await a.fill("#vote-seconds", "600")
            await a.check("#vote-enabled")
            await a.wait_for_selector("#vote:not([hidden])")
            assert await a.is_hidden("#act-button")  # proposals replace /act

            c = await open_tab(ctx, base, errors)  # never joins
            await c.wait_for_selector("#vote:not([hidden])")
            await c.evaluate(f"sessionStorage.setItem('animegamer.name', {NAME!r})")
            await propose(c, "fly on broomstick", "sky", others=["jiji"])
            await a.wait_for_selector('#vote-options li[data-number="1"]')
            await propose(a, "walk", "town")
            for page in (a, c):
                await page.wait_for_selector('#vote-options li[data-number="2"]')
            assert await a.inner_text('#vote-options li[data-number="1"] .who') == NAME

            await c.click('#vote-options li[data-number="1"] button')
            await a.wait_for_selector('#vote-options li[data-number="1"][data-votes="1"]')
            assert "0 so far" in await a.inner_text("#vote-status")
            await a.screenshot(path=str(ARTIFACTS / "play-vote-open.png"), full_page=True)
            await a.click('#vote-options li[data-number="2"] button')  # the only player: the round closes
            for page in (a, c):
                await page.wait_for_selector('#vote[data-round="closed"]')
            assert await c.inner_text("#vote-status") == "Option 1 won with 1 vote, the earliest of 2 tied options: it is turn #1."
            await a.wait_for_selector('article.turn[data-seq="1"]')
            await a.screenshot(path=str(ARTIFACTS / "play-vote-closed.png"), full_page=True)
        finally:
            await browser.close()
    async with sessions() as s:
        (turn,) = (await s.scalars(select(Turn))).all()
    assert turn.author_name == NAME and turn.characters == ["jiji"]
    assert errors == []
