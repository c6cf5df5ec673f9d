"""The play page's language, from the same catalogs as the bot.

Every request runs in one locale (a middleware makes it current, so each refusal and error the
page shows renders in it): the `?lang=` query, else the `lang` cookie (set by the page's language
menu; opening `/?lang=ja` sets it too), else the browser's `Accept-Language` (which carries
`navigator.languages`), else English. With `settings.pseudo_locale` every request is in the
pseudo-locale. A choice that names no shipped catalog is passed over for the next source.

`GET /api/i18n` gives the page's scripts what they need to show their own strings (marked in
play/static/*.js with `t("...")`, `tn("...", "...", n)` and `pgettext("context", "...")`, which
`animegamer i18n extract` collects into the shared template) in that locale: the translations of
exactly those strings (a message with a context keyed `context + "\x04" + msgid`, as in a .mo),
the catalog's plural rule (its gettext `Plural-Forms` expression, which is also valid JavaScript,
with every plural message's forms in the catalog's order), the `<html lang>` and `dir`, and the
shipped languages in their own names for the menu.
"""

from __future__ import annotations

import gettext
import re
from functools import cache
from pathlib import Path

from aiohttp import web
from babel import Locale, UnknownLocaleError
from babel.messages.extract import extract_from_file

from i18n import current_locale, locales
from i18n.catalogs import translations
from i18n.context import use_locale
from play.page import page_of

COOKIE = "lang"
QUERY = "lang"
COOKIE_MAX_AGE = 365 * 24 * 3600
STATIC = Path(__file__).resolve().parent / "static"
# What marks a string in the page's scripts (as animegamer.i18n_cli.KEYWORDS extracts them).
JS_KEYWORDS = {"t": None, "tn": (1, 2), "pgettext": ((1, "c"), 2)}
CONTEXT_SEPARATOR = "\x04"
ENGLISH_PLURAL = (2, "(n != 1)")
# A Plural-Forms expression: C's arithmetic, comparisons and ternaries on n (the same in JavaScript).
_PLURAL_FORMS = re.compile(r"\s*nplurals\s*=\s*([1-9])\s*;\s*plural\s*=\s*([^;]+?)\s*;?\s*")
_EXPRESSION = re.compile(r"[n0-9\s()?:<>=!&|%+\-*/]+")
# Where a plural index first appears: small counts, then the round numbers some languages single out.
_COUNTS = (*range(0, 1001), 10**6, 2 * 10**6, 10**9)


def _chosen(tag: str | None) -> str | None:
    """The catalog a stated choice names; None when it names none (then the next source decides)."""
    if not tag:
        return None
    found = locales.resolve(tag)
    if found != locales.SOURCE or tag.strip().lower().startswith("en"):
        return found
    return None


def request_locale(request: web.Request) -> str:
    if page_of(request).settings.pseudo_locale:
        return locales.PSEUDO
    for tag in (request.query.get(QUERY), request.cookies.get(COOKIE)):
        if (found := _chosen(tag)) is not None:
            return found
    return locales.from_accept_language(request.headers.get("Accept-Language"))


@web.middleware
async def locale_middleware(request: web.Request, handler):
    """Outermost: everything inside (the error middleware's messages too) renders in the
    request's locale. `/?lang=...` also remembers the choice in the cookie (an unknown or empty
    one forgets it)."""
    with use_locale(request_locale(request)):
        response = await handler(request)
    if request.path == "/" and QUERY in request.query and not response.prepared:
        if (chosen := _chosen(request.query[QUERY])) is not None:
            response.set_cookie(COOKIE, chosen, max_age=COOKIE_MAX_AGE, path="/", samesite="Lax")
        else:
            response.del_cookie(COOKIE, path="/")
    return response


# --- what the page's scripts get


@cache
def page_messages() -> tuple[tuple[tuple[str | None, str], ...], tuple[tuple[str, str], ...]]:
    """The strings marked in the page's scripts: ((context, msgid) of each singular, (singular,
    plural) pairs)."""
    singular: dict[tuple[str | None, str], None] = {}
    plural: dict[tuple[str, str], None] = {}
    for path in sorted(STATIC.glob("*.js")):
        for _lineno, message, _comments, context in extract_from_file("javascript", path, keywords=JS_KEYWORDS):
            if isinstance(message, str):
                singular[(context, message)] = None
            elif message and message[0] and message[1]:
                plural[(message[0], message[1])] = None
    return tuple(singular), tuple(plural)


def _message(tr: gettext.NullTranslations, context: str | None, msgid: str) -> tuple[str, str]:
    """(key, translation) of one singular message."""
    if context is None:
        return msgid, tr.gettext(msgid)
    return f"{context}{CONTEXT_SEPARATOR}{msgid}", tr.pgettext(context, msgid)


def plural_rule(tr: gettext.NullTranslations) -> tuple[int, str]:
    """(number of forms, expression) of a catalog: its Plural-Forms header, else English's."""
    m = _PLURAL_FORMS.fullmatch(tr.info().get("plural-forms", ""))
    if m is None or not _EXPRESSION.fullmatch(m.group(2)):
        return ENGLISH_PLURAL
    return int(m.group(1)), m.group(2)


def plural_forms(tr: gettext.NullTranslations, singular: str, plural: str, rule: tuple[int, str]) -> list[str]:
    """A plural message's forms in the catalog's order: each as ngettext gives it for the first
    count the rule maps to that form."""
    nplurals, expression = rule
    index = gettext.c2py(expression)
    first: dict[int, int] = {}
    for n in _COUNTS:
        first.setdefault(index(n), n)
        if len(first) == nplurals:
            break
    return [tr.ngettext(singular, plural, first[i]) if i in first else plural for i in range(nplurals)]


@cache
def own_name(locale: str) -> str:
    """A language as its speakers write it (日本語, Deutsch, Português (Brasil))."""
    try:
        name = Locale.parse(locale).get_display_name(locale) or locale
    except (ValueError, UnknownLocaleError):
        return locale
    return name[:1].upper() + name[1:]


def html_lang(locale: str) -> str:
    """The BCP 47 tag for <html lang> and the browser's Intl formatting."""
    return "en-XA" if locale == locales.PSEUDO else locale.replace("_", "-")


def text_direction(locale: str) -> str:
    try:
        order = Locale.parse(locales.babel_locale(locale)).character_order
    except (ValueError, UnknownLocaleError):
        return "ltr"
    return "rtl" if order == "right-to-left" else "ltr"


def page_translations(locale: str, chosen: str | None) -> dict:
    tr = translations(locale)
    rule = plural_rule(tr)
    singulars, plurals = page_messages()
    messages = {key: text for ctx, m in singulars for key, text in [_message(tr, ctx, m)] if text != m}
    return {
        "locale": locale,
        "lang": html_lang(locale),
        "dir": text_direction(locale),
        "chosen": chosen,
        "messages": messages,
        "plural": {"nplurals": rule[0], "expression": rule[1]},
        "plurals": {s: plural_forms(tr, s, p, rule) for s, p in plurals},
        "languages": [{"code": code, "name": own_name(code)} for code in locales.shipped()],
    }


async def get_i18n(request: web.Request) -> web.Response:
    body = page_translations(current_locale(), _chosen(request.cookies.get(COOKIE)))
    # The answer depends on the cookie and the browser's languages: never reuse another's.
    return web.json_response(body, headers={"Cache-Control": "no-cache", "Vary": "Accept-Language, Cookie"})


def add_language_routes(app: web.Application) -> None:
    app.router.add_get("/api/i18n", get_i18n)
