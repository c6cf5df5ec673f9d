"""The slash commands the bot syncs stay valid for Discord in every locale: localized names within
Discord's naming rule, descriptions and choices within their lengths, every locale key one of
Discord's, no two options or subcommands sharing a localized name, and each command within
Discord's 8000-character total per locale.

The payload is built the way a sync builds it (the bot's tree, its extensions, bot/parts/translator.py's
CatalogTranslator, `get_translated_payload` per command) and checked with tests/i18n/discord_rules,
which is written independently of the translator's own checks. It is checked once with the shipped
catalogs and once with every string of every locale answered by the pseudo-locale (accented and
lengthened): the code must hold what Discord would refuse out of the payload.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import bot.parts.translator as translator_module
from bot.client import EXTENSIONS, AnimeGamerBot
from bot.parts.translator import CatalogTranslator
from i18n import catalogs, locales
from i18n.pseudo import NAME_CONTEXTS, pseudo, pseudo_name
from settings import Settings
from tests.i18n import discord_rules as rules

SUBCOMMAND, GROUP = 1, 2  # option types that hold options
CHAT_INPUT = 1


async def payloads() -> list[dict[str, Any]]:
    """Every command's payload as `tree.sync()` would send it, translated by the bot's translator."""
    bot = AnimeGamerBot(Settings(_env_file=None), db=None)  # type: ignore[arg-type]  # nothing connects
    try:
        for ext in EXTENSIONS:
            await bot.load_extension(ext)
        await bot.tree.set_translator(CatalogTranslator())
        translator = bot.tree.translator
        assert isinstance(translator, CatalogTranslator)
        return [await cmd.get_translated_payload(bot.tree, translator) for cmd in bot.tree.get_commands()]
    finally:
        with contextlib.suppress(Exception):  # a client that never logged in: closing it is not what is tested
            await bot.close()


def _nodes(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A command and every option under it (subcommand groups, subcommands, parameters)."""
    yield path, node
    for option in node.get("options") or ():
        yield from _nodes(option, f"{path} {option['name']}")


def _localized(node: dict[str, Any], key: str, locale: str | None) -> str:
    value = node.get(key) or ""
    return (node.get(f"{key}_localizations") or {}).get(locale, value) if locale else value


def problems(commands: list[dict[str, Any]]) -> list[str]:
    """Everything in the payloads that Discord would refuse (empty when it would take them all)."""
    out: list[str] = []
    every_locale: list[str | None] = [None, *sorted(rules.LOCALES)]
    top_names: dict[tuple[int, str | None], Counter[str]] = {}

    for cmd in commands:
        kind = cmd.get("type", CHAT_INPUT)
        where = f"/{cmd['name']}" if kind == CHAT_INPUT else f"context menu {cmd['name']!r}"
        for locale in every_locale:
            top_names.setdefault((kind, locale), Counter())[_localized(cmd, "name", locale)] += 1

        if kind != CHAT_INPUT:  # USER and MESSAGE commands: a name only
            for locale, name in (cmd.get("name_localizations") or {}).items():
                if locale not in rules.LOCALES:
                    out.append(f"{where}: name_localizations has {locale!r}, not a Discord locale")
                if why := rules.context_menu_name_problem(name):
                    out.append(f"{where}: {locale} name {name!r} {why}")
            continue

        for path, node in _nodes(cmd, f"/{cmd['name']}"):
            if why := rules.name_problem(node["name"]):
                out.append(f"{path}: the default name {node['name']!r} {why}")
            if why := rules.text_problem(node.get("description"), rules.DESCRIPTION_MAX):
                out.append(f"{path}: the default description {why}")
            for key in ("name_localizations", "description_localizations"):
                for locale, text in (node.get(key) or {}).items():
                    if locale not in rules.LOCALES:
                        out.append(f"{path}: {key} has {locale!r}, not a Discord locale")
                    why = rules.name_problem(text) if key == "name_localizations" else \
                        rules.text_problem(text, rules.DESCRIPTION_MAX)
                    if why:
                        out.append(f"{path}: {locale} {key.split('_')[0]} {text!r} {why}")
            for choice in node.get("choices") or ():
                if why := rules.text_problem(choice.get("name"), rules.CHOICE_NAME_MAX):
                    out.append(f"{path}: choice {choice.get('name')!r} {why}")
                for locale, text in (choice.get("name_localizations") or {}).items():
                    if locale not in rules.LOCALES:
                        out.append(f"{path}: choice {choice['name']!r} has {locale!r}, not a Discord locale")
                    if why := rules.text_problem(text, rules.CHOICE_NAME_MAX):
                        out.append(f"{path}: {locale} choice {text!r} (for {choice['name']!r}) {why}")
            # no two options of a command, nor two subcommands of a group, share a name in a locale
            children = node.get("options") or ()
            for locale in every_locale:
                names = Counter(_localized(child, "name", locale) for child in children)
                for name, n in names.items():
                    if n > 1:
                        out.append(f"{path}: {n} options are named {name!r} in {locale or 'the default locale'}")

        for locale in every_locale:
            total = 0
            for _path, node in _nodes(cmd, ""):
                total += len(_localized(node, "name", locale)) + len(_localized(node, "description", locale))
                for choice in node.get("choices") or ():
                    total += len(_localized(choice, "name", locale)) + len(str(choice.get("value", "")))
            if total > rules.COMMAND_TOTAL_MAX:
                out.append(f"{where}: {total} characters in {locale or 'the default locale'} (Discord: at most "
                           f"{rules.COMMAND_TOTAL_MAX} for a command's names, descriptions and choices)")

    for (kind, locale), names in top_names.items():
        for name, n in names.items():
            if n > 1:
                out.append(f"{n} commands of type {kind} are named {name!r} in {locale or 'the default locale'}")
    return out


async def test_the_synced_payload_is_valid_in_every_locale():
    """With the shipped catalogs: what the bot would sync now."""
    catalogs.reload()
    commands = await payloads()
    assert commands, "the bot has no commands"
    assert {c.get("type", CHAT_INPUT) for c in commands} >= {CHAT_INPUT}
    found = problems(commands)
    assert not found, "Discord would refuse the synced commands:\n  " + "\n  ".join(found)


@pytest.fixture
def pseudo_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The translator answers every string in every Discord locale with the pseudo-locale's text
    (names: `pseudo_name`, the rest: `pseudo`), as a catalog with long translations would."""

    def answer(context: str, msgid: str, /, **params: Any) -> str:
        return pseudo_name(msgid) if context in NAME_CONTEXTS else pseudo(msgid)

    monkeypatch.setattr(translator_module, "pgettext", answer)
    monkeypatch.setattr(translator_module, "locales", SimpleNamespace(
        resolve=lambda tag: "pseudo-everywhere", SOURCE=locales.SOURCE, PSEUDO=locales.PSEUDO))


async def test_long_translations_keep_the_payload_valid(pseudo_everywhere):
    commands = await payloads()
    found = problems(commands)
    assert not found, "with long translations Discord would refuse the synced commands:\n  " + "\n  ".join(found)

    # Pseudo names stay valid names: every name is localized in every locale. A description or a
    # choice is left out (Discord shows the default) only where the long text breaks Discord's limit.
    missing = []
    for cmd in commands:
        if cmd.get("type", CHAT_INPUT) != CHAT_INPUT:
            if set(cmd.get("name_localizations") or {}) != rules.LOCALES \
                    and rules.context_menu_name_problem(pseudo(cmd["name"])) is None:
                missing.append(f"context menu {cmd['name']!r}: a valid name left out")
            continue
        for path, node in _nodes(cmd, f"/{cmd['name']}"):
            if set(node.get("name_localizations") or {}) != rules.LOCALES:
                missing.append(f"{path}: name not localized in {sorted(rules.LOCALES - set(node.get('name_localizations') or {}))}")
            if set(node.get("description_localizations") or {}) != rules.LOCALES \
                    and rules.text_problem(pseudo(node["description"]), rules.DESCRIPTION_MAX) is None:
                missing.append(f"{path}: a valid description left out")
            for choice in node.get("choices") or ():
                if choice.get("value") in locales.shipped():
                    continue  # a language's own name (日本語), the same in every locale: never translated
                if set(choice.get("name_localizations") or {}) != rules.LOCALES \
                        and rules.text_problem(pseudo(choice["name"]), rules.CHOICE_NAME_MAX) is None:
                    missing.append(f"{path}: choice {choice['name']!r}: a valid name left out")
    assert not missing, "the translator dropped valid translations:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize(("name", "valid"), [
    ("start", True), ("log-channel", True), ("time_of_day", True), ("kiki's", True), ("act2", True),
    ("ĝàɱé", True), ("ゲーム開始", True), ("게임", True), ("开始", True), ("начать", True), ("straße", True),
    ("नमस्ते", True), ("สวัสดี", True),  # Devanagari and Thai, their combining marks included
    ("x" * 32, True),
    ("", False), ("x" * 33, False), ("Start", False), ("НАЧАТЬ", False), ("ẞ", False), ("ǅ", False),
    ("game start", False), ("game/start", False), ("⟦start⟧", False), ("start!", False), ("🎬", False),
    ("e\u0301", False),  # a combining accent outside Devanagari and Thai
])
def test_the_translator_knows_discords_name_rule(name, valid):
    assert (rules.name_problem(name) is None) is valid, rules.name_problem(name)
    assert (translator_module.name_problem(name, "command name") is None) is valid


def test_the_checker_finds_what_discord_refuses():
    """The checks above fail on each kind of payload Discord refuses."""
    long = "d" * 101
    option = {"type": 3, "name": "motion", "description": "What happens", "name_localizations": {"ja": "動き", "de": "Bewegung"},
              "description_localizations": {"fr": long, "xx": "Quoi"},
              "choices": [{"name": "walk", "value": "walk", "name_localizations": {"ja": ""}}]}
    twin = {"type": 3, "name": "background", "description": "Where", "name_localizations": {"ja": "動き"}}
    commands = [
        {"type": 1, "name": "act", "description": "Play a turn", "name_localizations": {"ja": "アクト", "ko": "행동 하기"},
         "options": [option, twin]},
        {"type": 1, "name": "game", "description": "Games", "name_localizations": {"ko": "게임"}, "options": [
            {"type": 1, "name": "start", "description": "Start", "name_localizations": {"ru": "начать"}},
            {"type": 1, "name": "stop", "description": "Stop", "name_localizations": {"ru": "начать"}},
        ]},
        {"type": 1, "name": "big", "description": "x" * 100, "options": [
            {"type": 3, "name": f"o{i}", "description": "x" * 100,
             "choices": [{"name": "c" * 100, "value": "v" * 100} for _ in range(25)]} for i in range(25)]},
        {"type": 1, "name": "play", "description": "Play", "name_localizations": {"ko": "게임"}},
        {"type": 3, "name": "Report shot", "name_localizations": {"fr": "Signaler ce plan, avec une raison détaillée"}},
    ]
    found = "\n".join(problems(commands))
    for expected in (
        "/act motion: de name 'Bewegung' has letters with a lowercase variant",
        "/act: ko name '행동 하기' does not match",
        "/act motion: fr description",
        "description_localizations has 'xx', not a Discord locale",
        "/act motion: ja choice '' (for 'walk') has 0 characters",
        "/act: 2 options are named '動き' in ja",
        "/game: 2 options are named 'начать' in ru",
        "/big: ",  # over 8000 characters
        "2 commands of type 1 are named '게임' in ko",
        "context menu 'Report shot': fr name",
    ):
        assert expected in found, f"{expected!r} not found in:\n{found}"
    assert "characters in the default locale" in found  # /big's total
    assert problems(commands[1:2]) == ["/game: 2 options are named 'начать' in ru"]
