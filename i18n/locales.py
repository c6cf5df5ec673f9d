"""Which catalogs exist, and which of them serves a Discord locale or a browser's language.

The shipped locales are the directories under i18n/locales that hold a messages.po, plus English
(the source, which needs no catalog). Names are Discord's locale codes with `_`: `ja`, `zh_CN`,
`zh_TW`, `pt_BR`, `es` (one catalog for Spain and Latin America)... Anything without a catalog
falls back to its language's catalog, then to English.

PSEUDO is the pseudo-locale the tests run the bot in (accented, lengthened text between ⟦ ⟧,
built from the source strings, see i18n.pseudo): never offered to Discord or listed in menus; a
tester asks for it by name (`qps` as the language, e.g. the play page's `?lang=qps`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

SOURCE = "en"
PSEUDO = "qps"
LOCALES_DIR = Path(__file__).parent / "locales"
DOMAIN = "messages"

# Tags whose language alone would pick the wrong catalog, or that name a script instead of a region.
_ALIASES = {
    "zh": "zh_CN", "zh_Hans": "zh_CN", "zh_SG": "zh_CN", "zh_Hans_CN": "zh_CN", "zh_Hans_SG": "zh_CN",
    "zh_Hant": "zh_TW", "zh_HK": "zh_TW", "zh_MO": "zh_TW", "zh_Hant_TW": "zh_TW", "zh_Hant_HK": "zh_TW",
    "pt": "pt_BR",  # the one Portuguese catalog; closer for pt-PT readers than English
}


def po_path(locale: str) -> Path:
    return LOCALES_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
def shipped() -> tuple[str, ...]:
    """English first, then every locale with a catalog, sorted."""
    found = sorted(p.parent.parent.name for p in LOCALES_DIR.glob(f"*/LC_MESSAGES/{DOMAIN}.po"))
    return (SOURCE, *found)


def resolve(tag: object) -> str:
    """The catalog for a locale tag: a Discord locale (`ja`, `zh-TW`, `es-419`, a discord.Locale),
    a browser's (`pt-br`, `zh-Hant-HK`) or one of ours (`zh_TW`); English when none fits."""
    raw = str(getattr(tag, "value", tag) or "").strip()
    if raw == PSEUDO:
        return PSEUDO
    parts = [p for p in raw.replace("-", "_").split("_") if p]
    if not parts:
        return SOURCE
    parts = [parts[0].lower(), *(p.title() if len(p) == 4 else p.upper() if p.isalpha() else p for p in parts[1:])]
    available = shipped()
    for n in range(len(parts), 0, -1):
        name = "_".join(parts[:n])
        name = _ALIASES.get(name, name)
        if name in available:
            return name
    return SOURCE


def from_accept_language(header: str | None) -> str:
    """The best catalog for an HTTP Accept-Language header (RFC 9110 quality values)."""
    ranked: list[tuple[float, int, str]] = []
    for i, item in enumerate((header or "").split(",")):
        tag, _, params = item.strip().partition(";")
        q = 1.0
        for p in params.split(";"):
            key, _, value = p.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if tag and tag != "*" and q > 0:
            ranked.append((-q, i, tag))
    for _q, _i, tag in sorted(ranked):
        found = resolve(tag)
        if found != SOURCE or tag.lower().startswith("en"):
            return found
    return SOURCE


def babel_locale(locale: str) -> str:
    """The Babel/CLDR locale that formats numbers, dates and plurals for a catalog."""
    return SOURCE if locale == PSEUDO else locale
