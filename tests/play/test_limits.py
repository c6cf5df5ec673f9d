"""The page holds an /act field to settings/limits.py's cap, as Discord's /act does: its state JSON
serves the caps, its inputs take them as maxlength, and the API refuses one character more with
the game's own words and accepts the cap itself."""

from __future__ import annotations

import pytest
from playwright.async_api import async_playwright

from game.catalogue import FILMS
from game.instruction import build_instruction
from game.sanitize import InputRefused
from settings.limits import FIELD_MAX
from tests.play.conftest import running_app
from tests.play.test_api import A, get, post, start_and_join
from tests.play.test_browser import CHROMIUM, CHROMIUM_ARGS, open_tab

INPUTS = {"motion": "#act-motion", "adverb": "#act-adverb", "background": "#act-background", "time_of_day": "#act-time"}


@pytest.fixture
async def app(settings, engine, database_url, sessions):
    async with running_app(settings, engine, database_url) as (base, svc):
        yield base, svc


async def test_the_api_refuses_at_the_tables_cap(app, http):
    base, _ = app
    _, st = await get(http, f"{base}/api/state")
    assert st["limits"]["fields"] == FIELD_MAX
    await start_and_join(http, base)
    at_cap = {name: "x" * cap for name, cap in FIELD_MAX.items()}
    for name, cap in FIELD_MAX.items():
        over = {**at_cap, name: "x" * (cap + 1)}
        with pytest.raises(InputRefused) as refused:
            build_instruction(FILMS["qiqi"], ["qiqi"], **over)
        status, r = await post(http, f"{base}/api/act", {"player_id": A, **over})
        assert (status, r["error"], r["field"], r["message"]) == (400, "input_refused", name, str(refused.value))
        assert f"{cap + 1} characters; at most {cap}" in r["message"]
    status, r = await post(http, f"{base}/api/act", {"player_id": A, **at_cap})
    assert status == 200, r


@pytest.mark.browser
async def test_the_inputs_take_the_caps_from_the_state(app):
    base, _ = app
    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await open_tab(await browser.new_context(), base, errors)
            caps = {name: await page.eval_on_selector(sel, "e => e.maxLength") for name, sel in INPUTS.items()}
        finally:
            await browser.close()
    assert caps == FIELD_MAX
    assert errors == [], errors
