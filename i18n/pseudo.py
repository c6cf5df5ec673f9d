"""The pseudo-locale: every source string accented, lengthened by about 40 % and wrapped in ⟦ ⟧.

A run of the bot in it shows at a glance (and to the tests, mechanically) every user-visible
string that did not pass through a catalog: it is the text that is not between ⟦ and ⟧.
Placeholders (`%(name)s`), Discord markup (`<t:...>`, `<#...>`, `</cmd:id>`) and URLs are kept.
"""

from __future__ import annotations

import re

from babel.messages.catalog import Catalog

OPEN, CLOSE = "⟦", "⟧"
_ACCENTS = str.maketrans(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "àƀçđéƒĝĥîĵķĺɱñöþǫŕšţûṽŵẋýžÀßÇÐÉƑĜĤÎĴĶĹṀÑÖÞǪŔŠŢÛṼŴẊÝŽ",
)
# Not accented: placeholders, markup, URLs, slash commands' names (`/game start` must stay typable)
_KEEP = re.compile(r"%\([a-z_]+\)[sd]|%%|<[^<>\s]+>|https?://\S+|`[^`]*`|\{[a-z_]+\}")


def pseudo(text: str) -> str:
    if not text:
        return text
    out, last = [], 0
    for m in _KEEP.finditer(text):
        out.append(text[last:m.start()].translate(_ACCENTS))
        out.append(m.group())
        last = m.end()
    out.append(text[last:].translate(_ACCENTS))
    body = "".join(out)
    pad = "·" * max(1, len(text) * 2 // 5 // 3)
    return f"{OPEN}{body}{pad}{CLOSE}"


def pseudo_catalog() -> Catalog:
    """The source template's strings (i18n/locales/messages.pot), each made pseudo."""
    from babel.messages.pofile import read_po

    from i18n.locales import LOCALES_DIR

    with (LOCALES_DIR / "messages.pot").open("rb") as f:
        template = read_po(f, locale="en")
    out = Catalog(locale="en")
    for m in template:
        if not m.id:
            continue
        if isinstance(m.id, tuple | list):
            out.add(m.id, [pseudo(m.id[0]), pseudo(m.id[1])], context=m.context)
        elif m.context in NAME_CONTEXTS:
            out.add(m.id, pseudo_name(m.id), context=m.context)
        else:
            out.add(m.id, pseudo(m.id), context=m.context)
    return out


NAME_CONTEXTS = ("command name", "option name")


def pseudo_name(name: str) -> str:
    """A command or option name, still valid for Discord (lowercase letters, ≤ 32): accented only."""
    return name.translate(_ACCENTS)[:32]
