"""The i18n core on its own: which catalog serves a locale, translating with placeholders and
plurals, lazy messages, the current locale, numbers and times per locale, and the pseudo-locale.

Every test runs on catalogs written to a temporary directory (the `catalogs` fixture): the shipped
i18n/locales is neither read nor written.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import discord
import pytest
from babel.messages.catalog import Catalog
from babel.numbers import format_decimal

from i18n import L_, N_, _, current_locale, formatting, locales, ngettext, pgettext, pseudo, use_locale
from i18n.context import set_locale
from i18n.translate import Ln_, Lp_
from testkit.waits import loop_turns
from tests.i18n.discord_rules import name_problem
from tests.i18n.helpers import write_catalog, write_pot

HELLO = "Hello, %(name)s!"
TURNS = ("%(n)s turn waiting", "%(n)s turns waiting")
PAUSED = "This game is paused (%(reason)s)."
IDLE = "idle"
CANCEL = "Cancel"
FUZZY = "Nobody checked this one."
SHIPPED = ("de", "es", "fr", "ja", "ko", "pt_BR", "ru", "zh_CN", "zh_TW")

RU = {
    HELLO: "Привет, %(name)s!",
    TURNS: ("%(n)s ход ждёт", "%(n)s хода ждут", "%(n)s ходов ждут"),
    PAUSED: "Игра на паузе (%(reason)s).",
    IDLE: "бездействие",
    ("button", CANCEL): "Отменить",
    CANCEL: "Отмена",
}
JA = {
    HELLO: "こんにちは、%(name)sさん！",
    TURNS: ("待機中のターン %(n)s 件",),
    IDLE: "放置",
}


def _pot() -> Catalog:
    pot = Catalog(project="animegamer-discord", domain=locales.DOMAIN, fuzzy=False)
    for msgid in (HELLO, PAUSED, IDLE, CANCEL, FUZZY):
        pot.add(msgid, None, flags=("python-format",) if "%(" in msgid else ())
    pot.add(TURNS, None, flags=("python-format",))
    pot.add(CANCEL, None, context="button")
    pot.add("start", None, context="command name")
    pot.add("time_of_day", None, context="option name")
    pot.add("Start a game in this channel", None, context="command description")
    return pot


def _po(locale: str, strings: dict) -> Catalog:
    po = Catalog(locale=locale, domain=locales.DOMAIN, project="animegamer-discord", fuzzy=False)
    po.update(_pot())
    for key, text in strings.items():
        context, msgid = key if isinstance(key, tuple) and key[0] == "button" else (None, key)
        message = po.get(msgid, context=context)
        assert message is not None, key
        message.string = text
    return po


@pytest.fixture
def catalogs(catalog_dir: Path) -> Path:
    """A template and catalogs for the shipped locales: ru and ja translated in part (ru's FUZZY
    translation marked fuzzy), the others empty."""
    write_pot(catalog_dir, _pot())
    for locale in SHIPPED:
        po = _po(locale, RU if locale == "ru" else JA if locale == "ja" else {})
        if locale == "ru":
            fuzzy = po.get(FUZZY)
            assert fuzzy is not None
            fuzzy.string, fuzzy.flags = "Никто не проверил.", {"fuzzy"}
        write_catalog(catalog_dir, locale, po)
    return catalog_dir


# --- which catalog: Discord locales, browser tags, Accept-Language


def test_shipped_lists_english_first_then_every_catalog(catalogs):
    assert locales.shipped() == ("en", *sorted(SHIPPED))


@pytest.mark.parametrize(("tag", "expected"), [
    ("ja", "ja"), ("ko", "ko"), ("ru", "ru"), ("fr", "fr"), ("de", "de"),
    ("zh-CN", "zh_CN"), ("zh-TW", "zh_TW"),
    ("es-ES", "es"), ("es-419", "es"),  # Spain and Latin America share one catalog
    ("pt-BR", "pt_BR"),
    ("en-US", "en"), ("en-GB", "en"),
    ("it", "en"), ("uk", "en"), ("sv-SE", "en"), ("hi", "en"),  # no catalog: English
    ("zh_TW", "zh_TW"), ("pt_BR", "pt_BR"),  # our own names
])
def test_discord_locale_codes(catalogs, tag, expected):
    assert locales.resolve(tag) == expected


@pytest.mark.parametrize(("member", "expected"), [
    (discord.Locale.japanese, "ja"),
    (discord.Locale.chinese, "zh_CN"),
    (discord.Locale.taiwan_chinese, "zh_TW"),
    (discord.Locale.korean, "ko"),
    (discord.Locale.brazil_portuguese, "pt_BR"),
    (discord.Locale.spain_spanish, "es"),
    (discord.Locale.latin_american_spanish, "es"),
    (discord.Locale.french, "fr"),
    (discord.Locale.german, "de"),
    (discord.Locale.russian, "ru"),
    (discord.Locale.american_english, "en"),
    (discord.Locale.british_english, "en"),
    (discord.Locale.italian, "en"),
    (discord.Locale.thai, "en"),
])
def test_discord_locale_enum_members(catalogs, member, expected):
    assert locales.resolve(member) == expected


def test_every_discord_locale_resolves_to_a_shipped_catalog(catalogs):
    for member in discord.Locale:
        assert locales.resolve(member) in locales.shipped(), member


@pytest.mark.parametrize(("tag", "expected"), [
    ("zh-Hant-HK", "zh_TW"), ("zh-Hant", "zh_TW"), ("zh-HK", "zh_TW"), ("zh-hk", "zh_TW"), ("zh-MO", "zh_TW"),
    ("zh-Hans-CN", "zh_CN"), ("zh-Hans", "zh_CN"), ("zh", "zh_CN"), ("zh-SG", "zh_CN"),
    ("pt-PT", "pt_BR"), ("pt", "pt_BR"), ("pt-br", "pt_BR"),
    ("ja-JP", "ja"), ("de-AT", "de"), ("de-CH", "de"), ("fr-CA", "fr"), ("es-MX", "es"), ("ko-KR", "ko"),
    ("RU", "ru"), (" ja ", "ja"),
])
def test_browser_language_tags(catalogs, tag, expected):
    assert locales.resolve(tag) == expected


@pytest.mark.parametrize("tag", [None, "", "   ", "-", "_", "!!!", "x" * 100, "xx-YY", "klingon", "123", 42, "*", "en;q=0.5"])
def test_anything_else_falls_back_to_english(catalogs, tag):
    assert locales.resolve(tag) == "en"


def test_the_pseudo_locale_is_never_a_fallback(catalogs):
    assert locales.resolve("qps") == locales.PSEUDO
    assert locales.PSEUDO not in locales.shipped()


def test_without_catalogs_everything_is_english(catalog_dir):
    assert locales.shipped() == ("en",)
    assert {locales.resolve(m) for m in discord.Locale} == {"en"}


@pytest.mark.parametrize(("header", "expected"), [
    ("ja", "ja"),
    ("fr-CH, fr;q=0.9, en;q=0.8, de;q=0.7, *;q=0.5", "fr"),
    ("de;q=0.5, ja;q=0.9", "ja"),  # quality first
    ("ko, ja", "ko"),  # equal quality: the header's order
    ("ja;q=0.8, ko;q=0.8", "ja"),
    ("it, es;q=0.8, fr;q=0.5", "es"),  # it has no catalog: the next one that has
    ("en-US, ja;q=0.9", "en"),  # English asked for first is English, not the next language
    ("en-GB,en;q=0.9,zh-TW;q=0.8", "en"),
    ("it, en;q=0.9, ja;q=0.8", "en"),
    ("zh-Hant-HK, en;q=0.5", "zh_TW"),
    ("pt-PT,pt;q=0.9", "pt_BR"),
    ("*", "en"),  # a wildcard names no catalog
    ("*, ja;q=0.1", "ja"),
    ("ja;q=0", "en"),  # q=0: not acceptable
    ("ja;q=0, ko", "ko"),
    ("ja;q=abc, fr;q=0.5", "fr"),  # a malformed quality counts as 0
    ("ja;q=, fr;q=0.5", "fr"),
    ("ja ; q = 0.9 ; foo=bar, de;q=0.8", "ja"),
    ("ja;level=1", "ja"),  # other parameters ignored
    (",,, ;;; , ja", "ja"),
    (";;;,,,", "en"),
    ("", "en"),
    (None, "en"),
    ("x" * 500, "en"),
    ("tlh, i-klingon", "en"),
])
def test_accept_language(catalogs, header, expected):
    assert locales.from_accept_language(header) == expected


# --- translating


def test_gettext_with_placeholders(catalogs):
    assert _(HELLO, name="Ana") == "Hello, Ana!"  # English: the source text
    with use_locale("ru"):
        assert _(HELLO, name="Ана") == "Привет, Ана!"
        assert _(PAUSED, reason=_(IDLE)) == "Игра на паузе (бездействие)."
    with use_locale("ja"):
        assert _(HELLO, name="アナ") == "こんにちは、アナさん！"
        assert _(PAUSED, reason="x") == "This game is paused (x)."  # untranslated: English
    with use_locale("de"):
        assert _(HELLO, name="Ana") == "Hello, Ana!"  # an empty catalog: English
    assert _("A string no catalog has.") == "A string no catalog has."


def test_placeholder_values_are_not_translated_or_interpreted(catalogs):
    with use_locale("ru"):
        assert _(HELLO, name="%(name)s 100% <@1>") == "Привет, %(name)s 100% <@1>!"
        assert _(HELLO, name=IDLE) == "Привет, idle!"  # a value is data, never looked up
    assert _(IDLE) == "idle"


def test_pgettext_keeps_contexts_apart(catalogs):
    with use_locale("ru"):
        assert pgettext("button", CANCEL) == "Отменить"
        assert _(CANCEL) == "Отмена"
        assert pgettext("other context", CANCEL) == CANCEL
    assert pgettext("button", CANCEL) == CANCEL


@pytest.mark.parametrize(("n", "form"), [
    (1, 0), (21, 0), (101, 0), (1001, 0),  # one
    (2, 1), (3, 1), (4, 1), (22, 1), (34, 1), (102, 1),  # few
    (0, 2), (5, 2), (11, 2), (12, 2), (14, 2), (19, 2), (25, 2), (100, 2), (111, 2),  # many
])
def test_ngettext_picks_russian_forms_by_cldr_rules(catalogs, n, form):
    with use_locale("ru"):
        text = ngettext(*TURNS, n)
    assert text == RU[TURNS][form] % {"n": format_decimal(n, locale="ru")}


def test_ngettext_formats_the_count_for_the_locale(catalogs):
    assert ngettext(*TURNS, 1) == "1 turn waiting"
    assert ngettext(*TURNS, 1234) == "1,234 turns waiting"
    with use_locale("ru"):
        assert ngettext(*TURNS, 1234) == "1\xa0234 хода ждут"  # 1234: "few"; a no-break space groups digits
    with use_locale("ja"):
        assert ngettext(*TURNS, 1) == ngettext(*TURNS, 7).replace("7", "1") == "待機中のターン 1 件"  # one form
    with use_locale("de"):
        assert ngettext(*TURNS, 1234) == "1.234 turns waiting"  # untranslated, yet a German number
    assert ngettext(*TURNS, 3, n="three") == "three turns waiting"  # an explicit n wins


def test_fuzzy_translations_are_not_shown(catalogs):
    with use_locale("ru"):
        assert _(FUZZY) == FUZZY


def test_n_marks_only(catalogs):
    assert N_(IDLE) == IDLE
    with use_locale("ru"):
        assert N_(IDLE) == IDLE and _(N_(IDLE)) == "бездействие"


# --- lazy messages and the current locale


def test_lazy_renders_in_the_locale_current_when_shown(catalogs):
    hello, idle = L_(HELLO, name="Ana"), L_(IDLE)
    with use_locale("ru"):
        made_in_russian = L_(HELLO, name="Ана")
    assert str(made_in_russian) == "Hello, Ана!"  # made inside, shown outside: English
    assert str(hello) == "Hello, Ana!"
    with use_locale("ru"):
        assert str(hello) == "Привет, Ana!" and f"{idle}" == "бездействие"
        assert str(made_in_russian) == "Привет, Ана!"
    with use_locale("ja"):
        assert str(hello) == "こんにちは、Anaさん！"
    assert str(idle) == "idle"


def test_lazy_plural_context_and_nested(catalogs):
    turns, cancel = Ln_(*TURNS, 5), Lp_("button", CANCEL)
    paused = L_(PAUSED, reason=L_(IDLE))  # a lazy placeholder is rendered with its sentence
    assert (str(turns), str(cancel), str(paused)) == ("5 turns waiting", "Cancel", "This game is paused (idle).")
    with use_locale("ru"):
        assert (str(turns), str(cancel), str(paused)) == ("5 ходов ждут", "Отменить", "Игра на паузе (бездействие).")
        assert _(PAUSED, reason=L_(IDLE)) == "Игра на паузе (бездействие)."


def test_lazy_behaves_like_its_text(catalogs):
    idle = L_(IDLE)
    with use_locale("ru"):
        assert idle == "бездействие" and len(idle) == len("бездействие")
        assert idle + "!" == "бездействие!" and "¡" + idle == "¡бездействие"
    assert idle == "idle" and idle == L_(IDLE) and hash(idle) == hash(L_(IDLE))
    assert "idle" in repr(idle)


def test_use_locale_nests_and_restores(catalogs):
    assert current_locale() == "en"
    with use_locale("ru") as outer:
        assert outer == current_locale() == "ru"
        with use_locale("ja-JP") as inner:
            assert inner == current_locale() == "ja"
            with use_locale("it") as fallback:
                assert fallback == current_locale() == "en"
                assert _(HELLO, name="x") == "Hello, x!"
            assert current_locale() == "ja"
        assert current_locale() == "ru" and _(IDLE) == "бездействие"
        with pytest.raises(RuntimeError), use_locale("zh-Hant-HK"):
            assert current_locale() == "zh_TW"
            raise RuntimeError("left by an exception")
        assert current_locale() == "ru"
    assert current_locale() == "en"
    with use_locale(discord.Locale.brazil_portuguese) as chosen:
        assert chosen == "pt_BR"


async def test_the_locale_belongs_to_one_task(catalogs):
    """Two interactions at once, each in its member's language (a context variable per task)."""
    started = asyncio.Event()
    seen: dict[str, list[str]] = {}

    async def interaction(tag: str, wait: bool) -> None:
        set_locale(tag)
        if wait:
            await started.wait()
        else:
            started.set()
        await loop_turns()  # the other task runs here, with its own locale
        seen[tag] = [current_locale(), _(IDLE)]

    await asyncio.gather(asyncio.create_task(interaction("ru", True)), asyncio.create_task(interaction("ja", False)))
    assert seen == {"ru": ["ru", "бездействие"], "ja": ["ja", "放置"]}
    assert current_locale() == "en"  # neither task changed the caller's


# --- numbers, times, sizes and lists


@pytest.mark.parametrize(("locale", "expected"), [
    ("en", "1,234,567.5"), ("de", "1.234.567,5"), ("fr", "1\u202f234\u202f567,5"), ("ja", "1,234,567.5"),
    ("ru", "1\xa0234\xa0567,5"), ("pt_BR", "1.234.567,5"),
])
def test_number(catalogs, locale, expected):
    with use_locale(locale):
        assert formatting.number(1234567.5) == expected


def test_number_digits_and_percent(catalogs):
    assert formatting.number(2.5, 2) == "2.50" and formatting.number(1234.567, 0) == "1,235"
    assert formatting.percent(0.45) == "45%"
    with use_locale("de"):
        assert formatting.number(2.5, 2) == "2,50" and formatting.percent(0.45) == "45\xa0%"
    with use_locale("fr"):
        assert formatting.number(1234.5, 1) == "1\u202f234,5"


@pytest.mark.parametrize(("locale", "later", "earlier"), [
    ("en", "in 3 minutes", "3 minutes ago"),
    ("de", "in 3 Minuten", "vor 3 Minuten"),
    ("fr", "dans 3 minutes", "il y a 3 minutes"),
    ("ja", "3 分後", "3 分前"),
    ("ru", "через 3 минуты", "3 минуты назад"),
])
def test_relative(catalogs, locale, later, earlier):
    with use_locale(locale):
        assert formatting.relative(180) == later
        assert formatting.relative(-180) == earlier


@pytest.mark.parametrize(("locale", "seconds", "expected"), [
    ("en", 3600, "1 hour"), ("en", 180, "3 minutes"), ("en", 45, "45 seconds"), ("en", 2 * 86400, "2 days"),
    ("de", 3600, "1 Stunde"), ("ja", 3600, "1 時間"), ("fr", 3600, "1\xa0heure"), ("ru", 180, "3 минуты"),
    ("ru", 300, "5 минут"),
])
def test_duration(catalogs, locale, seconds, expected):
    with use_locale(locale):
        assert formatting.duration(seconds) == expected


def test_size(catalogs):
    assert formatting.size(8 * 1024 * 1024) == "8.0 MB"
    assert formatting.size(25 * 1024 * 1024 + 512 * 1024) == "25.5 MB"
    assert formatting.size(750 * 1024) == "750 KB"
    assert formatting.size(10) == "1 KB"  # never 0 KB
    with use_locale("de"):
        assert formatting.size(8 * 1024 * 1024) == "8,0 MB"
    with use_locale("fr"):
        assert formatting.size(1536 * 1024 * 1024) == "1\u202f536,0 MB"


@pytest.mark.parametrize(("locale", "standard", "alternatives"), [
    ("en", "a, b, and c", "a, b, or c"),
    ("de", "a, b und c", "a, b oder c"),
    ("fr", "a, b et c", "a, b ou c"),
    ("ja", "a、b、c", "a、b、またはc"),
    ("ru", "a, b и c", "a, b или c"),
])
def test_items(catalogs, locale, standard, alternatives):
    with use_locale(locale):
        assert formatting.items(["a", "b", "c"]) == standard
        assert formatting.items(("a", "b", "c"), style="or") == alternatives
        assert formatting.items(["a"]) == "a"
        assert formatting.items([]) == ""


def test_the_pseudo_locale_formats_like_english(catalogs):
    with use_locale(locales.PSEUDO):
        assert formatting.number(1234567.5) == "1,234,567.5"
        assert formatting.relative(180) == "in 3 minutes"


# --- the pseudo-locale


def _outside_markers(text: str) -> str:
    assert text.startswith(pseudo.OPEN) and text.endswith(pseudo.CLOSE), text
    return text[len(pseudo.OPEN):-len(pseudo.CLOSE)]


def test_pseudo_accents_lengthens_and_marks():
    source = "Start a game in this channel"
    out = pseudo.pseudo(source)
    body = _outside_markers(out)
    assert len(out) >= len(source) * 1.1
    assert not re.search(r"[A-Za-z]", body), body  # every ASCII letter accented
    assert body.rstrip("·").replace("·", "") != source
    assert pseudo.pseudo("") == ""
    assert pseudo.pseudo("a").startswith(pseudo.OPEN)


def test_pseudo_keeps_placeholders_markup_urls_and_commands():
    kept = ["%(name)s", "%(n)s", "%%", "<t:1700000000:R>", "<#123>", "<@456>", "<@&789>", "</act:1>",
            "https://example.com/play?a=b&lang=ja", "`/game start`"]
    source = ("Hello %(name)s: %(n)s turns, 100%% done <t:1700000000:R> in <#123> by <@456> for <@&789>, "
              "try </act:1> or https://example.com/play?a=b&lang=ja or `/game start` now")
    out = pseudo.pseudo(source)
    for piece in kept:
        assert piece in out, piece
    rest = out
    for piece in kept:
        rest = rest.replace(piece, "")
    assert not re.search(r"[A-Za-z]", _outside_markers(rest)), rest
    # still a valid format string with the same names
    assert out % {"name": "Ana", "n": 3} == out.replace("%(name)s", "Ana").replace("%(n)s", "3").replace("%%", "%")


def test_pseudo_names_stay_valid_discord_names():
    for name in ("start", "act", "log-channel", "time_of_day", "with", "game", "admin", "filter", "x", "a" * 32,
                 "kiki's", "motion2", "zzz"):
        out = pseudo.pseudo_name(name)
        assert name_problem(out) is None, (name, out, name_problem(out))
        assert out != name or not re.search(r"[a-z]", name)
    assert len(pseudo.pseudo_name("a" * 40)) == 32


def test_pseudo_catalog_is_built_from_the_template(catalogs):
    from i18n.pseudo import NAME_CONTEXTS, pseudo_catalog

    catalog = pseudo_catalog()
    for m in _pot():
        if not m.id:
            continue
        t = catalog.get(m.id, context=m.context)
        assert t is not None and t.string, m.id
        if isinstance(m.id, tuple):
            assert all(pseudo.OPEN in s for s in t.string)
        elif m.context in NAME_CONTEXTS:
            assert name_problem(t.string) is None, t.string
        else:
            assert isinstance(t.string, str) and t.string.startswith(pseudo.OPEN)
        assert list(t.check(catalog)) == [], (m.id, t.string)  # Babel's checkers: same placeholders
    with use_locale(locales.PSEUDO):
        hello = _(HELLO, name="Ana")
        assert hello.startswith(pseudo.OPEN) and "Ana" in hello and hello != "Hello, Ana!"
        one, many = ngettext(*TURNS, 1), ngettext(*TURNS, 5)
        assert "1" in one and "5" in many and one.startswith(pseudo.OPEN) and many.startswith(pseudo.OPEN)
        assert pgettext("button", CANCEL).startswith(pseudo.OPEN)
        assert _("not in the template") == "not in the template"  # what bypasses the catalog shows
