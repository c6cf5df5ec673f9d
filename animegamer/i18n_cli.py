"""`animegamer i18n extract|update|check|new`: keeping the catalogs in step with the code.

- extract: every string marked in the code (`_`, `L_`, `N_`, `ngettext`, `pgettext`... in bot/,
  play/, game/ and db/; `t(...)` in the play page's scripts) and every name, description, option
  and choice of the slash commands (asked of the command tree the way a sync asks its
  translator), written to i18n/locales/messages.pot;
- update: every shipped .po brought to the template (new strings added untranslated, changed ones
  marked fuzzy, removed ones dropped), translations kept;
- check: every string translated (not fuzzy) in every shipped locale, the same placeholders as the
  source (Babel's checkers), plural forms complete, command names and descriptions within
  Discord's rules.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

from i18n import locales

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("bot", "play", "game", "service", "db")
KEYWORDS = {
    "_": None, "N_": None, "L_": None, "t": None,
    "ngettext": (1, 2), "Ln_": (1, 2), "tn": (1, 2),
    "pgettext": ((1, "c"), 2), "Lp_": ((1, "c"), 2),
}
METHODS = [("**/static/**.js", "javascript"), ("**.py", "python")]
POT = locales.LOCALES_DIR / "messages.pot"


def code_messages() -> Iterable[tuple[str, int, str | tuple[str, ...], str | None, list[str]]]:
    """(file, line, message, context, translator comments) of every marked string in the code."""
    for d in SOURCE_DIRS:
        for filename, lineno, message, comments, context in extract_from_dir(
                ROOT / d, METHODS, keywords=KEYWORDS, comment_tags=("TRANSLATORS:",), strip_comment_tags=True):
            if message:
                yield f"{d}/{filename}", lineno, message, context, comments


async def _command_strings() -> list[tuple[str, str]]:
    """(context, text) of every string a command sync would ask the translator for."""
    from discord import app_commands

    from bot.client import EXTENSIONS, AnimeGamerBot
    from bot.parts.translator import context_of
    from settings import Settings

    asked: list[tuple[str, str]] = []

    class Recorder(app_commands.Translator):
        async def translate(self, string, locale, context):
            if not string.extras.get("autonym"):  # a language's own name is never translated
                asked.append((context_of(context), string.message))
            return None

    bot = AnimeGamerBot(Settings(), db=None)  # type: ignore[arg-type]  # nothing connects
    for ext in EXTENSIONS:
        await bot.load_extension(ext)
    recorder = Recorder()
    for cmd in bot.tree.get_commands():  # asks for every string once, for whichever locale
        await cmd.get_translated_payload(bot.tree, recorder)
    # Not closed: it never connected (an unstarted AutoShardedBot's close() trips on its queue).
    seen: dict[tuple[str, str], None] = dict.fromkeys(asked)
    return list(seen)


def template() -> Catalog:
    pot = Catalog(project="animegamer-discord", domain=locales.DOMAIN, fuzzy=False)
    for filename, lineno, message, context, comments in code_messages():
        first = message if isinstance(message, str) else message[0]
        known = pot.get(message, context=context)
        if known is not None:  # the same message in several places: one entry, every location
            known.locations.append((filename, lineno))
            known.auto_comments.extend(c for c in comments if c not in known.auto_comments)
            continue
        pot.add(message, None, [(filename, lineno)], context=context, auto_comments=comments,
                flags=("python-format",) if "%(" in first else ())
    for context, text in asyncio.run(_command_strings()):
        pot.add(text, None, [("bot/answers/cogs", 0)], context=context)
    from game import vocabulary

    for context, term in vocabulary.messages():  # the packaged films' suggestions, shown translated
        pot.add(term, None, [("game/films.toml", 0)], context=context,
                auto_comments=[vocabulary.TRANSLATOR_NOTE[context]])
    return pot


def extract() -> Catalog:
    pot = template()
    POT.parent.mkdir(parents=True, exist_ok=True)
    with POT.open("wb") as f:
        write_po(f, pot, width=100, sort_output=False, omit_header=False)
    return pot


def update(pot: Catalog | None = None) -> list[str]:
    if pot is None:
        with POT.open("rb") as f:
            pot = read_po(f)
    done = []
    for locale in locales.shipped()[1:]:
        path = locales.po_path(locale)
        with path.open("rb") as f:
            po = read_po(f, locale=locale)
        po.update(pot, no_fuzzy_matching=True)
        po.obsolete.clear()
        with path.open("wb") as f:
            write_po(f, po, width=100, ignore_obsolete=True)
        done.append(locale)
    return done


def new_locale(locale: str) -> Path:
    """Start a catalog for a locale from the template (every string untranslated)."""
    with POT.open("rb") as f:
        pot = read_po(f)
    po = Catalog(locale=locale, domain=locales.DOMAIN, project="animegamer-discord")
    po.update(pot)
    path = locales.po_path(locale)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, po, width=100)
    locales.shipped.cache_clear()
    return path


_PLACEHOLDER = re.compile(r"%\(([a-z_]+)\)[sd]")


def _dropped_placeholders(msgid, msgstr) -> set[str]:
    """Placeholders of the source missing from a translation (Babel's checker only catches
    unknown ones). A plural form may leave out the count (`n`): "one turn", "一つ"."""
    source = {p for text in ([msgid] if isinstance(msgid, str) else msgid) for p in _PLACEHOLDER.findall(text)}
    forms = [msgstr] if isinstance(msgstr, str) else list(msgstr)
    missing: set[str] = set()
    for form in forms:
        missing |= source - set(_PLACEHOLDER.findall(form)) - ({"n"} if len(forms) > 1 or not isinstance(msgid, str) else set())
    return {f"%({p})s" for p in missing}


def problems(locale: str) -> list[str]:
    """Every reason the locale's catalog is not complete and correct (empty when it is)."""
    from bot.parts.translator import problem

    with POT.open("rb") as f:
        pot = read_po(f)
    with locales.po_path(locale).open("rb") as f:
        po = read_po(f, locale=locale)
    out = []
    for m in pot:
        if not m.id:
            continue
        t = po.get(m.id, context=m.context)
        label = f"{locale}: {m.context + ': ' if m.context else ''}{m.id if isinstance(m.id, str) else m.id[0]!r}"
        if t is None or not t.string or (isinstance(t.string, tuple | list) and not all(t.string)):
            out.append(f"{label} is not translated")
            continue
        if t.fuzzy:
            out.append(f"{label} is fuzzy (changed since it was translated)")
        for err in t.check(po):
            out.append(f"{label}: {err}")
        if missing := _dropped_placeholders(m.id, t.string):
            out.append(f"{label}: the translation drops {', '.join(sorted(missing))}")
        if m.context and isinstance(t.string, str) and (why := problem(t.string, m.context)):
            out.append(f"{label}: {t.string!r} {why}")
    return out


def _extract(args) -> int:
    pot = extract()
    print(f"{POT.relative_to(ROOT)}: {len(pot)} messages")
    if args.update:
        print("updated: " + ", ".join(update(pot)))
    return 0


def _update(args) -> int:
    print("updated: " + ", ".join(update()))
    return 0


def _new(args) -> int:
    print(f"created {new_locale(args.locale).relative_to(ROOT)}: translate it, then add its line to docs/i18n.md")
    return 0


def _check(args) -> int:
    found = []
    for locale in args.locales or locales.shipped()[1:]:
        found += problems(locale)
    for p in found[: args.limit]:
        print(f"  {p}", file=sys.stderr)
    if found:
        print(f"animegamer i18n check: {len(found)} problem(s)", file=sys.stderr)
        return 1
    print("catalogs complete: " + ", ".join(locales.shipped()))
    return 0


def register(sub) -> None:
    p = sub.add_parser("i18n", help="message catalogs: extract strings, update and check the .po files")
    isub = p.add_subparsers(dest="i18n_command", required=True)
    e = isub.add_parser("extract", help="write i18n/locales/messages.pot from the code and the slash commands")
    e.add_argument("--update", action="store_true", help="then bring every .po to it")
    e.set_defaults(func=_extract)
    isub.add_parser("update", help="bring every .po to messages.pot").set_defaults(func=_update)
    n = isub.add_parser("new", help="start a catalog for a locale (Discord's code with _: it, pt_BR, zh_TW)")
    n.add_argument("locale")
    n.set_defaults(func=_new)
    c = isub.add_parser("check", help="every string translated, same placeholders, names within Discord's rules")
    c.add_argument("locales", nargs="*", help="default: every shipped locale")
    c.add_argument("--limit", type=int, default=50, help="problems printed at most")
    c.set_defaults(func=_check)
