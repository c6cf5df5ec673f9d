"""The shipped catalogs (i18n/locales/*/LC_MESSAGES/messages.po) are complete and in step with
the code: every message translated in every shipped locale with the same placeholders (Babel's
checkers), command names within Discord's rules, and the committed template up to date.

These read the real files; a failure here is fixed in the catalogs, never by marking the test.
"""

from __future__ import annotations

import re

import pytest
from babel.messages.pofile import read_po

from animegamer import i18n_cli
from i18n import catalogs, locales

# Issue #23: English (the source) plus at least these; Spain and Latin America share `es`.
REQUIRED = ("ja", "zh_CN", "zh_TW", "ko", "pt_BR", "es", "fr", "de", "ru")
UPDATE = "run `animegamer i18n extract --update` (then translate what it added) and commit messages.pot and the .po files"


def _shipped() -> list[str]:
    catalogs.reload()
    return list(locales.shipped()[1:])


def _key(message) -> tuple[str | None, str | tuple[str, ...]]:
    mid = message.id
    return message.context, tuple(mid) if isinstance(mid, list | tuple) else mid


def _label(key: tuple[str | None, str | tuple[str, ...]]) -> str:
    context, mid = key
    text = mid if isinstance(mid, str) else " | ".join(mid)
    return f"[{context}] {text!r}" if context else repr(text)


def test_the_required_locales_are_shipped():
    missing = [loc for loc in REQUIRED if loc not in _shipped()]
    assert not missing, (
        f"no catalog for {missing}: issue #23 ships {', '.join(REQUIRED)}; start one with "
        "`animegamer i18n new <locale>` (i18n/locales/<locale>/LC_MESSAGES/messages.po)"
    )


@pytest.mark.parametrize("locale", sorted(set(REQUIRED) | set(_shipped())))
def test_every_message_is_translated_with_the_same_placeholders(locale):
    """`animegamer i18n check`: translated, not fuzzy, the source's placeholders (Babel's
    python-format checker), every plural form, names and descriptions within Discord's rules."""
    assert locales.po_path(locale).is_file(), f"{locale} has no catalog at {locales.po_path(locale)}"
    problems = i18n_cli.problems(locale)
    shown = "\n  ".join(problems[:200])
    more = f"\n  ... and {len(problems) - 200} more" if len(problems) > 200 else ""
    assert not problems, f"{len(problems)} problem(s) in the {locale} catalog:\n  {shown}{more}"


PLACEHOLDER = re.compile(r"%\((\w+)\)[-#0 +]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]")


def _names(texts) -> set[str]:
    return {name for text in texts if text for name in PLACEHOLDER.findall(text)}


@pytest.mark.parametrize("locale", _shipped())
def test_translations_keep_every_placeholder(locale):
    """Babel's python-format checker lets a translation leave a placeholder out (it only refuses
    unknown ones): a dropped %(name)s loses the player's name, the count, the film. Every
    placeholder of the source is in the translation (in one of its plural forms, for a plural)."""
    with locales.po_path(locale).open("rb") as f:
        po = read_po(f, locale=locale)
    dropped = []
    for m in po:
        if not m.id or not m.string:
            continue
        source = m.id if isinstance(m.id, list | tuple) else [m.id]
        translated = m.string if isinstance(m.string, list | tuple) else [m.string]
        if not all(translated):
            continue  # untranslated: the other test says so
        if missing := _names(source) - _names(translated):
            dropped.append(f"{_label(_key(m))} -> {translated!r} lacks {sorted(missing)}")
    assert not dropped, f"{len(dropped)} translation(s) in {locale} drop a placeholder:\n  " + "\n  ".join(dropped)


def test_the_committed_template_is_up_to_date():
    """i18n/locales/messages.pot holds exactly the strings the code and the slash commands ask for."""
    assert i18n_cli.POT.is_file(), f"{i18n_cli.POT} is missing: {UPDATE}"
    with i18n_cli.POT.open("rb") as f:
        on_disk = {_key(m) for m in read_po(f) if m.id}
    in_code = {_key(m) for m in i18n_cli.template() if m.id}
    new = sorted(in_code - on_disk, key=str)
    gone = sorted(on_disk - in_code, key=str)
    lines = [f"+ {_label(k)}" for k in new] + [f"- {_label(k)}" for k in gone]
    assert not lines, (
        f"messages.pot is out of date with the code ({len(new)} new, {len(gone)} no longer used): {UPDATE}\n  "
        + "\n  ".join(lines[:200])
    )


@pytest.mark.parametrize("locale", _shipped())
def test_every_catalog_follows_the_template(locale):
    """A .po holds the template's messages (brought to it by `animegamer i18n update`); an entry the
    template no longer has is a stale translation nobody will see."""
    with i18n_cli.POT.open("rb") as f:
        template = {_key(m) for m in read_po(f) if m.id}
    with locales.po_path(locale).open("rb") as f:
        po = read_po(f, locale=locale)
    stale = sorted({_key(m) for m in po if m.id} - template, key=str)
    assert not stale, f"{locale} has {len(stale)} message(s) the template lacks: {UPDATE}\n  " + "\n  ".join(
        _label(k) for k in stale[:100])
