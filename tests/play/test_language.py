"""The play page in the player's language: every request runs in the locale of `?lang=`, else the
`lang` cookie, else Accept-Language, else English, and its refusals render in it; GET /api/i18n
gives the page's scripts their strings, plural rule and forms, and the shipped languages.

The catalogs are written to a temporary LOCALES_DIR (the shipped i18n/locales is never written):
the template of the code's strings (`animegamer.i18n_cli.code_messages`), which the pseudo-locale
is built from, and small Japanese and Russian catalogs."""

from __future__ import annotations

import gettext
import io
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import write_po

from game import session_errors, vocabulary
from game.catalogue import FILMS
from i18n import catalogs, locales, use_locale
from i18n.pseudo import pseudo
from play import language
from play.errors import PAGE_HINTS
from tests.i18n.helpers import catalogs_in
from tests.play.conftest import running_app

ROOT = Path(__file__).resolve().parents[2]
JA = {
    "There is no such turn.": "そのターンはありません。",
    "Join the game": "ゲームに参加",
    "Language": "言語",
}
RU_VOTES = ["%(n)s голос", "%(n)s голоса", "%(n)s голосов"]
VOTES = ("%(n)s vote", "%(n)s votes")


@cache
def template_po() -> bytes:
    """The template's strings from the code and the films' vocabulary, as `animegamer i18n
    extract` collects them (without the slash commands' own strings, which need the bot's command
    tree: not the page's)."""
    from animegamer.i18n_cli import code_messages

    pot = Catalog(project="animegamer-discord", domain=locales.DOMAIN, fuzzy=False)
    for filename, lineno, message, context, *_comments in code_messages():
        text = message if isinstance(message, str) else message[0]
        pot.add(message, None, [(filename, lineno)], context=context, flags=("python-format",) if "%(" in text else ())
    for context, term in vocabulary.messages():
        pot.add(term, None, context=context)
    buf = io.BytesIO()
    write_po(buf, pot, width=100, omit_header=False)
    return buf.getvalue()


def write_catalog(root: Path, locale: str, translations: dict) -> None:
    po = Catalog(locale=locale, domain=locales.DOMAIN)
    for msgid, msgstr in translations.items():
        po.add(msgid, msgstr, flags=("python-format",) if "%(" in str(msgid) else ())
    path = root / locale / "LC_MESSAGES" / f"{locales.DOMAIN}.po"
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        write_po(f, po)


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "locales"
    root.mkdir()
    (root / "messages.pot").write_bytes(template_po())
    write_catalog(root, "ja", {**JA, VOTES: ["%(n)s 票"]})
    write_catalog(root, "ru", {VOTES: RU_VOTES})
    with catalogs_in(root):
        yield root


@pytest.fixture
async def app(settings, engine, database_url, sessions, catalog_dir):
    async with running_app(settings, engine, database_url) as (base, svc):
        yield base, svc


async def get(http, url, **headers):
    async with http.get(url, headers=headers) as r:
        return r.status, await r.json()


async def post(http, url, body=None, **headers):
    async with http.post(url, json=body or {}, headers=headers) as r:
        return r.status, await r.json()


async def test_refusals_follow_accept_language(app, http):
    base, _ = app
    with use_locale(locales.PSEUDO):  # the game's refusal, then the page's hint: both through the catalogs
        no_session = session_errors.NoSession().shown(PAGE_HINTS)
    assert no_session.startswith("⟦") and no_session.endswith("⟧")

    # A game rule (GameError, lazy) and a refusal of the page's own, in the pseudo-locale...
    status, body = await post(http, f"{base}/api/join", {"player_id": 1, "name": "Ann", "character": "qiqi"},
                              **{"Accept-Language": "qps"})
    assert status == 409 and body["message"] == no_session
    status, body = await get(http, f"{base}/api/turns/99999", **{"Accept-Language": "qps, en;q=0.5"})
    assert status == 404 and body["message"] == pseudo("There is no such turn.")
    # ... aiohttp's own 404 (the router's) ...
    status, body = await get(http, f"{base}/nowhere", **{"Accept-Language": "qps"})
    assert status == 404 and body["message"] == pseudo("There is nothing here.")
    # ... in a shipped locale, and in English without a header or for a language with no catalog.
    status, body = await get(http, f"{base}/api/turns/99999", **{"Accept-Language": "ja-JP,ja;q=0.9,en;q=0.8"})
    assert body["message"] == "そのターンはありません。"
    for header in ({}, {"Accept-Language": "it-IT, it;q=0.9"}, {"Accept-Language": "*"}):
        status, body = await get(http, f"{base}/api/turns/99999", **header)
        assert body["message"] == "There is no such turn.", header
    status, body = await post(http, f"{base}/api/join", {"player_id": 1, "name": "Ann", "character": "qiqi"})
    assert body["message"] == session_errors.NoSession().shown(PAGE_HINTS) == "No game is running in this channel. Start one under Setup."


async def test_query_and_cookie_choose_over_the_header(app, http):
    base, _ = app
    url = f"{base}/api/turns/99999"
    japanese = {"Accept-Language": "ja"}
    assert (await get(http, f"{url}?lang=en", **japanese))[1]["message"] == "There is no such turn."
    assert (await get(http, url, Cookie="lang=en", **japanese))[1]["message"] == "There is no such turn."
    assert (await get(http, url, Cookie="lang=ja"))[1]["message"] == "そのターンはありません。"
    assert (await get(http, f"{url}?lang=ja", Cookie="lang=en"))[1]["message"] == "そのターンはありません。"  # query first
    # A choice with no catalog is passed over: the next source decides.
    assert (await get(http, f"{url}?lang=xx", **japanese))[1]["message"] == "そのターンはありません。"
    assert (await get(http, url, Cookie="lang=tlh", **japanese))[1]["message"] == "そのターンはありません。"
    assert (await get(http, f"{url}?lang=xx"))[1]["message"] == "There is no such turn."

    # Opening the page with ?lang= remembers the choice; an unknown or empty one forgets it.
    async with http.get(f"{base}/?lang=ja-JP") as r:
        assert r.status == 200 and r.cookies["lang"].value == "ja"
    async with http.get(f"{base}/?lang=") as r:
        assert r.cookies["lang"].value == "" and r.cookies["lang"]["max-age"] == "0"


async def test_settings_pseudo_locale_wins(settings, engine, database_url, sessions, catalog_dir, http):
    pseudo_settings = settings.model_copy(update={"pseudo_locale": True})
    async with running_app(pseudo_settings, engine, database_url) as (base, _):
        status, body = await get(http, f"{base}/api/turns/99999?lang=ja", **{"Accept-Language": "ja"})
        assert body["message"] == pseudo("There is no such turn.")
        status, i18n = await get(http, f"{base}/api/i18n")
        assert i18n["locale"] == locales.PSEUDO and i18n["lang"] == "en-XA"
        assert i18n["messages"]["Join the game"] == pseudo("Join the game")
        assert i18n["plurals"]["%(n)s vote"] == [pseudo(VOTES[0]), pseudo(VOTES[1])]


async def test_the_page_gets_its_strings(app, http):
    base, _ = app
    async with http.get(f"{base}/api/i18n", headers={"Accept-Language": "ja,en;q=0.5"}) as r:
        assert r.status == 200 and r.headers["Cache-Control"] == "no-cache" and "Accept-Language" in r.headers["Vary"]
        body = await r.json()
    assert (body["locale"], body["lang"], body["dir"], body["chosen"]) == ("ja", "ja", "ltr", None)
    assert body["messages"]["Join the game"] == "ゲームに参加" and body["messages"]["Language"] == "言語"
    assert "You" not in body["messages"]  # untranslated: the page keeps the English
    assert body["plural"] == {"nplurals": 1, "expression": "0"} and body["plurals"][VOTES[0]] == ["%(n)s 票"]
    assert body["languages"] == [
        {"code": "en", "name": "English"}, {"code": "ja", "name": "日本語"}, {"code": "ru", "name": "Русский"},
    ]

    status, body = await get(http, f"{base}/api/i18n", Cookie="lang=ru", **{"Accept-Language": "ja"})
    assert (body["locale"], body["chosen"]) == ("ru", "ru")
    assert body["plural"]["nplurals"] == 3 and body["plurals"][VOTES[0]] == RU_VOTES
    # The expression the page evaluates picks the form Python's ngettext picks, for every count.
    index = gettext.c2py(body["plural"]["expression"])
    tr = catalogs.translations("ru")
    for n in (*range(0, 130), 1001, 1_000_000):
        assert body["plurals"][VOTES[0]][index(n)] == tr.ngettext(*VOTES, n), n

    status, body = await get(http, f"{base}/api/i18n", **{"Accept-Language": "it"})
    assert (body["locale"], body["lang"]) == ("en", "en")
    assert body["messages"] == {} and body["plural"] == {"nplurals": 2, "expression": "(n != 1)"}
    assert body["plurals"][VOTES[0]] == list(VOTES)


def test_the_route_sends_what_extraction_collects():
    """The page's strings as the server finds them are the ones `animegamer i18n extract` puts in
    the template from play/static (same keywords, contexts and plurals)."""
    from animegamer.i18n_cli import KEYWORDS, METHODS

    extracted = {
        (context, message if isinstance(message, str) else tuple(message))
        for filename, _lineno, message, _comments, context in extract_from_dir(ROOT / "play", METHODS, keywords=KEYWORDS)
        if filename.startswith("static/")
    }
    singulars, plurals = language.page_messages()
    assert extracted == set(singulars) | {(None, p) for p in plurals}
    assert ("progress stage", "imagining the scene") in singulars and ("%(n)s vote", "%(n)s votes") in plurals
    assert len(singulars) > 60


async def test_films_and_suggestions_in_the_players_language(app, http):
    """Titles and characters by the names the player's language knows (game.catalogue's local
    names), the suggestions as the catalogs show them; what is stored and sent to the model stays
    English."""
    base, _ = app
    ja = {"Accept-Language": "ja"}
    film = FILMS["qiqi"]
    assert (await post(http, f"{base}/api/start"))[0] == 200
    status, r = await post(http, f"{base}/api/join", {"player_id": 7, "name": "Ann", "character": "qiqi"}, **ja)
    assert status == 200 and r["character"] == "qiqi"
    status, r = await post(http, f"{base}/api/act", {"player_id": 7, "motion": "walk", "background": "town"}, **ja)
    assert status == 200 and r["instruction"] == "Character: Qiqi; Motion: walk; Background: town."

    status, st = await get(http, f"{base}/api/state?player=7", **ja)
    assert st["film"]["title"] == film.title_in("ja") == "魔女の宅急便"
    assert [c["name"] for c in st["film"]["characters"]] == [film.character_name_in(c.id, "ja") for c in film.characters]
    assert st["players"][0]["character_name"] == st["states"]["qiqi"]["name"] == "キキ"
    assert st["state_labels"] == {n: n.capitalize() for n in ("stamina", "social", "entertainment")}  # no catalog for them here
    status, listing = await get(http, f"{base}/api/turns", **ja)
    assert listing["turns"][0]["characters"] == [{"id": "qiqi", "name": "キキ"}]
    assert listing["turns"][0]["instruction"] == r["instruction"]

    # English for an English browser.
    status, st = await get(http, f"{base}/api/state")
    assert st["film"]["title"] == film.title and st["players"][0]["character_name"] == "Qiqi"
    assert st["options"]["motions"] == list(film.motions)

    # The suggestions through the catalogs (the pseudo-locale's), matched as shown; one chosen
    # as shown reaches the model as the English term.
    qps = {"Accept-Language": "qps"}
    status, items = await get(http, f"{base}/api/suggest?field=motion&q=", **qps)
    assert items == [pseudo(m) for m in film.motions]
    status, st = await get(http, f"{base}/api/state", **qps)
    assert st["options"]["times"] == [pseudo(m) for m in film.times]
    status, items = await get(http, f"{base}/api/suggest?field=background&q={pseudo('town')[1:4]}", **qps)
    assert items[0] == pseudo("town")
    status, r = await post(http, f"{base}/api/act", {
        "player_id": 7, "motion": pseudo("fly on broomstick"), "background": pseudo("sky"), "time_of_day": pseudo("night"),
    }, **qps)
    assert status == 200, r
    assert r["instruction"] == "Character: Qiqi; Motion: fly on broomstick; Background: night sky."
