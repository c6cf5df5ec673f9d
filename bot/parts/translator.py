"""Slash commands in the member's language: discord.py's Translator backed by the catalogs.

When the bot syncs its commands, discord.py asks the translator for every name, description,
option and choice in every Discord locale; the answers become the payload's
`name_localizations` / `description_localizations`. Each kind of string has its own gettext
context, because a command's name ("start") and the same word in a sentence translate differently
and a name must obey Discord's rules (`valid_name`). A locale without a catalog, or a string not
translated in it, answers None: Discord then shows the default (English).
"""

from __future__ import annotations

import logging
import unicodedata

import discord
from discord import app_commands
from discord.app_commands import TranslationContextLocation as Where

from i18n import locales
from i18n.context import use_locale
from i18n.translate import pgettext

log = logging.getLogger(__name__)

NAME_MAX = 32  # Discord: command, option and context-menu names are 1-32 characters
DESCRIPTION_MAX = 100  # Discord: command and option descriptions are 1-100 characters
CHOICE_MAX = 100  # Discord: a choice's name is 1-100 characters

CONTEXTS = {
    Where.command_name: "command name",
    Where.group_name: "command name",
    Where.command_description: "command description",
    Where.group_description: "command description",
    Where.parameter_name: "option name",
    Where.parameter_description: "option description",
    Where.choice_name: "choice",
    Where.other: "command other",
}
CONTEXT_MENU = "context menu"  # a message command's name: spaces and capitals allowed


def context_of(context: app_commands.TranslationContextTypes) -> str:
    if context.location is Where.command_name and isinstance(context.data, app_commands.ContextMenu):
        return CONTEXT_MENU
    return CONTEXTS[context.location]


def _name_char(ch: str) -> bool:
    # Discord's rule: ^[-_'\p{L}\p{N}\p{sc=Deva}\p{sc=Thai}]{1,32}$ (Devanagari and Thai combining
    # marks are letters of those scripts; other marks are not allowed).
    if ch in "-_'":
        return True
    cat = unicodedata.category(ch)
    if cat[0] in "LN":
        return True
    return cat in ("Mn", "Mc") and any(s in unicodedata.name(ch, "") for s in ("DEVANAGARI", "THAI"))


def name_problem(name: str, context: str) -> str | None:
    """What makes a (localized) name unacceptable to Discord; None when it is valid."""
    if not 1 <= len(name) <= NAME_MAX:
        return f"must be 1-{NAME_MAX} characters (has {len(name)})"
    if context == CONTEXT_MENU:
        return None if name.strip() == name else "may not start or end with a space"
    if bad := sorted({ch for ch in name if not _name_char(ch)}):
        return f"may not contain {''.join(bad)!r} (letters, digits, - _ ' only)"
    if name != name.lower():
        return "must be lowercase"
    return None


def text_problem(text: str, context: str) -> str | None:
    """What makes a localized description or choice name unacceptable; None when valid."""
    limit = DESCRIPTION_MAX if "description" in context else CHOICE_MAX
    if not 1 <= len(text) <= limit:
        return f"must be 1-{limit} characters (has {len(text)})"
    return None


def problem(text: str, context: str) -> str | None:
    return name_problem(text, context) if context in ("command name", "option name", CONTEXT_MENU) \
        else text_problem(text, context)


class CatalogTranslator(app_commands.Translator):
    async def translate(self, string: app_commands.locale_str, locale: discord.Locale,
                        context: app_commands.TranslationContextTypes) -> str | None:
        catalog = locales.resolve(locale)
        if catalog in (locales.SOURCE, locales.PSEUDO) or string.extras.get("autonym"):
            return None  # English is the default; a language's own name (日本語) reads the same everywhere
        where = context_of(context)
        with use_locale(catalog):
            text = pgettext(where, string.message)
        if text == string.message:
            return None
        if (why := problem(text, where)) is not None:  # `animegamer i18n check` catches these first
            log.warning("%s translation of %s %r %s; Discord gets the default", catalog, where, string.message, why)
            return None
        return text
