"""The films' instruction vocabulary in the member's language, and back to the English the model knows.

A film's motions, adverbs, backgrounds and times of day (game/films.toml) are suggestions for /act's
fields. Players see them translated through the message catalogs, each kind with its own gettext
context ("motion", "adverb", "background", "time of day": "run" the motion and "evening" the time
may translate differently elsewhere); what reaches the model is always the English term the film was
trained on. Autocomplete sends the English term as the choice's value; a suggestion typed by hand in
any shipped language is mapped back by `to_model`. Any other text is the player's own and goes to
the model as typed.

`animegamer i18n extract` adds the packaged films' vocabulary to the template (`messages()`); an
operator's own films are shown in English unless the operator's catalogs translate their terms.
"""

from __future__ import annotations

import gettext
import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import resources

from game.catalogue import fold  # how typed text is compared: NFKC, case-folded, spaces collapsed
from i18n import current_locale, locales, pgettext
from i18n.catalogs import translations

# Film attribute -> gettext context of its terms.
CONTEXTS = {"motions": "motion", "adverbs": "adverb", "backgrounds": "background", "times": "time of day"}
KINDS = tuple(CONTEXTS)
# What translators read beside each term in the .po files.
TRANSLATOR_NOTE = {
    "motion": "What a character does in the shot, for /act's motion field (an autocomplete choice, at most "
              "100 characters). The model receives the English; this is only what the player sees.",
    "adverb": "How the character does it, for /act's adverb field (an autocomplete choice, at most 100 "
              "characters). The model receives the English; this is only what the player sees.",
    "background": "Where the shot takes place, for /act's background field (an autocomplete choice, at most "
                  "100 characters). The model receives the English; this is only what the player sees.",
    "time of day": "When the shot takes place, for /act's time field (an autocomplete choice, at most 100 "
                   "characters). The model receives the English; this is only what the player sees.",
}


def context_of(kind: str) -> str:
    """The gettext context of a kind, given as the Film attribute ("motions") or the context ("motion")."""
    if kind in CONTEXTS:
        return CONTEXTS[kind]
    if kind in CONTEXTS.values():
        return kind
    raise ValueError(f"unknown vocabulary kind {kind!r} (known: {', '.join(KINDS)})")


def _attr(kind: str) -> str:
    ctx = context_of(kind)
    return next(a for a, c in CONTEXTS.items() if c == ctx)


def shown(kind: str, term: str) -> str:
    """The term as the current locale shows it (the English term where no catalog translates it)."""
    return pgettext(context_of(kind), term)


@cache
def _shown_to_term(catalog: gettext.NullTranslations, context: str, terms: tuple[str, ...]) -> dict[str, str]:
    """fold(shown name in a catalog) -> English term; the first term wins a shared translation.
    Keyed on the compiled catalog, so a reloaded catalog (i18n.catalogs.reload) is read afresh."""
    out: dict[str, str] = {}
    for term in terms:
        out.setdefault(fold(catalog.pgettext(context, term)), term)
    return out


def terms_of(film, kind: str) -> tuple[str, ...]:
    """The film's suggestions of one kind (empty for no film)."""
    return tuple(getattr(film, _attr(kind), ())) if film is not None else ()


def _match(kind: str, typed: str, film) -> str | None:
    terms = terms_of(film, kind)
    key = fold(typed)
    if not terms or not key:
        return None
    ctx = context_of(kind)
    for locale in dict.fromkeys((locales.SOURCE, current_locale(), *locales.shipped())):
        term = _shown_to_term(translations(locale), ctx, terms).get(key)
        if term is not None:
            return term
    return None


def to_model(kind: str, typed: str, film) -> str:
    """What the model receives for a field: the English term when `typed` is one of the film's
    suggestions as shown in English, the current locale or any shipped locale (compared with
    `fold`: case, width and spacing do not matter); otherwise the typed text unchanged."""
    term = _match(kind, typed, film)
    return typed if term is None else term


def fields_to_model(film, motion: str, background: str, adverb: str = "", time_of_day: str = "") -> tuple[str, str, str, str]:
    """An instruction's four fields as the model should get them (`to_model` on each): what the
    one instruction assembly (game.channel_config.ChannelConfig.instruction) calls before building it."""
    return (to_model("motions", motion, film), to_model("backgrounds", background, film),
            to_model("adverbs", adverb, film), to_model("times", time_of_day, film))


def is_term(typed: str, films: Iterable) -> bool:
    """Whether `typed` is a suggestion of any kind of any of `films`, in English or as shown in
    the current locale or any shipped one."""
    return any(_match(kind, typed, film) is not None for film in films for kind in KINDS)


def messages(source: str | None = None) -> list[tuple[str, str]]:
    """(context, term) of every suggestion of the packaged films (or of a films file's text), in
    the file's order, each once: what `animegamer i18n extract` adds to the template."""
    text = source if source is not None else resources.files("game").joinpath("films.toml").read_text(encoding="utf-8")
    films = tomllib.loads(text).get("films", {})
    seen: dict[tuple[str, str], None] = {}
    for table in films.values():
        if not isinstance(table, dict):
            continue
        for attr, ctx in CONTEXTS.items():
            for term in table.get(attr, ()):
                if isinstance(term, str) and term.strip():
                    seen.setdefault((ctx, term.strip()), None)
    return list(seen)
