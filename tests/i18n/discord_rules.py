"""Discord's rules for localized application commands, written here independently of
bot/parts/translator.py so that the tests hold the translator to Discord, not to itself.

Sources: Discord's API reference, "Application Commands" (naming, localization, limits).
"""

from __future__ import annotations

import unicodedata

import discord

NAME_MAX = 32  # CHAT_INPUT command, option and subcommand names; context-menu names
DESCRIPTION_MAX = 100  # command and option descriptions
CHOICE_NAME_MAX = 100  # a choice's name
COMMAND_TOTAL_MAX = 8000  # name + description + value of a command, its options and choices, per locale
LOCALES = frozenset(loc.value for loc in discord.Locale)

try:  # the `regex` module knows Unicode scripts; without it, unicodedata does the same job
    import regex as _regex
except ImportError:  # pragma: no cover - depends on the environment
    _regex = None

# ^[-_'\p{L}\p{N}\p{sc=Deva}\p{sc=Thai}]{1,32}$ (Discord's CHAT_INPUT name pattern)
NAME_PATTERN = r"^[-_'\p{L}\p{N}\p{sc=Deva}\p{sc=Thai}]{1,32}$"
_NAME_RE = _regex.compile(NAME_PATTERN) if _regex is not None else None


def _allowed_char(ch: str) -> bool:
    if ch in "-_'":
        return True
    if unicodedata.category(ch)[0] in "LN":
        return True
    # \p{sc=Deva} and \p{sc=Thai}: every character of those scripts, their combining marks too
    name = unicodedata.name(ch, "")
    return name.startswith(("DEVANAGARI ", "THAI "))


def name_problem(name: object) -> str | None:
    """Why Discord would refuse `name` as a CHAT_INPUT command/option name; None when valid."""
    if not isinstance(name, str):
        return f"is not a string: {name!r}"
    if _NAME_RE is not None:
        ok = _NAME_RE.match(name) is not None
    else:
        ok = 1 <= len(name) <= NAME_MAX and all(_allowed_char(ch) for ch in name)
    if not ok:
        return f"does not match {NAME_PATTERN}"
    # "If there is a lowercase variant of any letters used, you must use those."
    if upper := [ch for ch in name if ch.lower() != ch]:
        return f"has letters with a lowercase variant: {''.join(upper)!r}"
    return None


def context_menu_name_problem(name: object) -> str | None:
    """USER and MESSAGE commands: 1-32 characters, any case, spaces allowed."""
    if not isinstance(name, str):
        return f"is not a string: {name!r}"
    if not 1 <= len(name) <= NAME_MAX:
        return f"has {len(name)} characters (1-{NAME_MAX})"
    return None


def text_problem(text: object, limit: int) -> str | None:
    if not isinstance(text, str):
        return f"is not a string: {text!r}"
    if not 1 <= len(text) <= limit:
        return f"has {len(text)} characters (1-{limit})"
    return None
