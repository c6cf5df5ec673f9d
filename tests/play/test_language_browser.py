"""The play page's language in headless Chromium (served in-process over a real Postgres, the
catalogs of tests/play/test_language.py): a Japanese browser gets the page in Japanese, the
language menu switches it to English and remembers it; in the pseudo-locale every text the page
shows came through the catalogs."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import async_playwright

from game.catalogue import FILMS
from i18n import locales
from tests.play.conftest import running_app
from tests.play.helpers import ARTIFACTS
from tests.play.test_browser import CHROMIUM, CHROMIUM_ARGS, join, open_tab
from tests.play.test_language import catalog_dir  # noqa: F401  (the temporary catalogs)

pytestmark = pytest.mark.browser

# What the page shows: the tab's title, the body's rendered text (options included), and the
# placeholders, titles and labels of visible elements.
VISIBLE_TEXTS = """
() => {
  const out = [document.title, document.body.innerText];
  for (const e of document.querySelectorAll('[placeholder], [title], [aria-label], [data-empty]')) {
    if (!e.checkVisibility()) continue;
    for (const a of ['placeholder', 'title', 'aria-label', 'data-empty']) if (e.getAttribute(a)) out.push(e.getAttribute(a));
  }
  return out;
}
"""
PSEUDO_TEXT = re.compile(r"⟦[^⟦⟧]*⟧")


def untranslated(texts: list[str]) -> list[str]:
    """What is left of the page's texts once every catalog string (between ⟦ ⟧) and the data are
    taken out (the brand, the channel's `#`, `/act`, films' titles, characters' and players' names,
    the example suggestions, the languages' own names, numbers): the strings that bypassed the
    catalogs."""
    data = {"AnimeGamer", "/act", "Ann", "English", "日本語", "Русский", *(f.title for f in FILMS.values()),
            *(c.name for f in FILMS.values() for c in f.characters),
            *(s for f in FILMS.values() for kind in ("motions", "backgrounds") for s in getattr(f, kind)[:1])}
    left = []
    for text in texts:
        while PSEUDO_TEXT.search(text):
            text = PSEUDO_TEXT.sub(" ", text)
        for word in sorted(data, key=len, reverse=True):
            text = text.replace(word, " ")
        left += [line.strip() for line in text.splitlines() if not re.fullmatch(r"[\s\d±+\-%.,:·#()]*", line)]
    return left


async def test_language_menu_and_pseudo_locale(settings, engine, database_url, sessions, catalog_dir):  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    async with running_app(settings, engine, database_url) as (base, _), async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = await browser.new_context(locale="ja-JP")  # its Accept-Language and navigator.languages
            page = await open_tab(ctx, base, errors)
            assert await page.evaluate("[document.documentElement.lang, document.documentElement.dir]") == ["ja", "ltr"]
            assert await page.text_content("#join-button") == "ゲームに参加"
            assert await page.get_attribute("#language", "aria-label") == "言語"
            assert await page.eval_on_selector_all("#language option", "os => os.map(o => o.value)") == ["", "en", "ja", "ru"]
            assert await page.input_value("#language") == ""  # following the browser

            await page.select_option("#language", "en")
            await page.wait_for_function("document.getElementById('join-button').textContent === 'Join the game'")
            assert await page.evaluate("document.documentElement.lang") == "en"
            assert {c.get("name"): c.get("value") for c in await ctx.cookies()}["lang"] == "en"
            await page.reload()
            await page.wait_for_function("window.animegamerReady === true")
            assert await page.text_content("#join-button") == "Join the game" and await page.input_value("#language") == "en"

            # The pseudo-locale (opened as /?lang=qps): nothing shown bypassed the catalogs.
            await page.goto(f"{base}/?lang=qps")
            await page.wait_for_function("window.animegamerReady === true")
            assert await page.evaluate("document.documentElement.lang") == "en-XA"
            assert untranslated(await page.evaluate(VISIBLE_TEXTS)) == []
            await page.click("#start-button")
            await join(page, "Ann", "qiqi")
            await page.wait_for_selector("#players li")
            await page.click("#setup summary")
            await page.check("#vote-enabled")
            await page.wait_for_selector("#vote:not([hidden])")
            assert untranslated(await page.evaluate(VISIBLE_TEXTS)) == []
            await page.screenshot(path=str(ARTIFACTS / "play-pseudo-locale.png"), full_page=True)
            assert await page.evaluate("i18n.locale") == locales.PSEUDO
        finally:
            await browser.close()
    assert errors == []
