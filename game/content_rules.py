"""Content rules: blocked words and phrases checked before a turn is queued (pure, no I/O).

A rule set is a list of terms in Discord AutoMod's keyword syntax, and an optional allow list in
the same syntax:

- `*term*`  anywhere, inside any word (`*cat*` matches "education");
- `term*`   at the start of a word (`cat*` matches "catapult");
- `*term`   at the end of a word (`*cat` matches "wildcat");
- `term`    the whole word or phrase only (`cat` matches "cat!" but not "cats").

A word boundary is whatever is not a letter, digit or underscore. A term may be a phrase (its
spaces match any run of whitespace, as the text's runs are made one space). A match that lies
inside a match of the allow list does not count (blocked `*cat*`, allowed `education`).

Text and terms are compared after the normalisation game.sanitize applies to player text: NFKC
(full-width and compatibility forms fold to plain ones), control and zero-width characters
removed, whitespace runs made one space; then case-folded (`normalise`). So `ＢＡＤ`, `b\u200bad`
and `BAD` all read `bad`. Both are then matched in their look-alike form (`fold_look_alikes`): a
non-ASCII letter or digit to which Unicode's confusables table (UTS #39, as shipped by the
`confusable_homoglyphs` package) gives a Latin prototype is replaced by it, so Cyrillic `bаd`
(U+0430), `ѕех`, Greek `bοx` and Latin `ɑ` or `ı` read `bad`, `sex`, `box`, `a`, `i`. Terms are
kept and shown as typed (normalised); only their patterns are folded, and run on folded text.
As terms and text fold alike, a term written with look-alikes matches plain text, and a Russian
term still matches Russian text, also with a Latin look-alike typed inside it (`сукa` with a
Latin a). It is UTS #39's skeleton narrowed to what cannot cause false matches:

- ASCII is never rewritten. The full skeleton also maps `m` to `rn`, `1` and `I` to `l`, `0` to
  `O`, so `porn*` would refuse "pomegranate";
- only a letter or digit is replaced, and only by ASCII letters or digits: a word stays a word
  and a boundary a boundary, so every match of the plain forms is a match of the folded ones
  (matching the folded form alone loses nothing), and the wildcard rules are unchanged;
- a letter without a Latin look-alike stays as it is (`д`, `ж`, `λ`): nothing is transliterated,
  so `дурак` never matches `durak`;
- Han, kana, Hangul and Bopomofo are left alone (the table maps `〇` to `O`), so Japanese, Chinese
  and Korean text never meets a Latin term through the fold.

What it cannot tell apart: a real word of another script made only of look-alike letters reads as
its Latin look-alike (Russian `ср`, "Wed.", reads `cp`). The fold costs nothing for ASCII text
and one cached look-up per other character; terms are folded once, when their patterns compile.

Regular expressions are not supported (a pattern's cost cannot be bounded with Python's
backtracking `re`); AutoMod's `regex_patterns` are therefore skipped (see docs/bot.md).

Bounds are AutoMod's own: at most 1,000 terms per rule set, 100 allow-list entries, 60
characters per term. `parse_term` is the one validation of a term, used by the operator's file,
by `/admin filter add` and for AutoMod's rules.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from confusable_homoglyphs import categories, confusables

from game.sanitize import clean_text
from i18n import L_, N_, Lazy

MAX_TERMS = 1000  # AutoMod: keyword_filter holds at most 1,000 keywords
MAX_ALLOW = 100  # AutoMod: allow_list of a keyword rule holds at most 100 entries
TERM_MAX = 60  # AutoMod: each keyword at most 60 characters

# Rule sets are named in English (they are compared and stored); `rule_set_label` shows them.
NEUTRAL_NAME = N_("a player")  # shown instead of a display name a rule set refuses
OPERATOR = N_("the operator's rules")
SERVER_FILTER = N_("this server's filter")
_AUTOMOD = "this server's AutoMod rule "


def automod_rule_name(name: str) -> str:
    """How a server's AutoMod rule is named (in English; `rule_set_label` translates it)."""
    return _AUTOMOD + (clean_text(name, 100) or "without a name")


def rule_set_label(name: str | Lazy) -> Lazy:
    """A rule set's name as the reader sees it, in the locale current where it is shown."""
    if isinstance(name, Lazy):
        return name
    if name.startswith(_AUTOMOD):
        rule = name.removeprefix(_AUTOMOD)
        if rule == "without a name":
            return L_("this server's AutoMod rule without a name")
        # TRANSLATORS: %(rule)s is the name a server's admins gave their AutoMod rule.
        return L_("this server's AutoMod rule %(rule)s", rule=rule)
    return Lazy(name, {})  # OPERATOR and SERVER_FILTER are in the catalogs (N_ above)


# A rule set as an audit entry keeps it (a refused text's `rule_set`): a code, and apart from it
# the name a server's admins gave their AutoMod rule (`rule`), rendered where the entry is read.
RULE_SET_CODES = {OPERATOR: "operator", SERVER_FILTER: "server_filter"}
AUTOMOD = "automod"


def rule_set_code(name: str) -> tuple[str, str | None]:
    """A rule set's English name (RuleSet.name) as stored: its code, and an AutoMod rule's name."""
    if name.startswith(_AUTOMOD):
        return AUTOMOD, name.removeprefix(_AUTOMOD)
    return RULE_SET_CODES.get(name, name), None


def stored_rule_set_label(code: str, rule: str | None = None) -> Lazy:
    """A stored rule set (rule_set_code) as the reader sees it; a name stored before the codes (its
    English name) reads as it did."""
    if code == AUTOMOD:
        return rule_set_label(automod_rule_name(rule or ""))
    return rule_set_label(next((name for name, c in RULE_SET_CODES.items() if c == code), code))


class TermRefused(ValueError):
    """A term that cannot be used; `reason` says why, worded for the person who typed it (in the
    locale current where it is read; `lazy_reason` keeps it for rendering later)."""

    def __init__(self, term: str, reason: str | Lazy):
        super().__init__(term, reason)
        self.term = term
        self.lazy_reason = reason

    @property
    def reason(self) -> str:
        return str(self.lazy_reason)

    def __str__(self) -> str:
        return f"{self.term!r}: {self.reason}"


def normalise(text: str | None) -> str:
    """Text as a term is kept and shown: game.sanitize's cleaning (NFKC, invisible characters
    dropped, whitespace runs made one space), case-folded. The rules match it folded
    (`fold_look_alikes`)."""
    if not text:
        return ""
    return clean_text(text, sys.maxsize).casefold()  # never cut: NFKC can make text many times longer


# Scripts whose characters are never folded: the confusables table maps a few of them to Latin
# (IDEOGRAPHIC NUMBER ZERO to O), and text in them must not meet a Latin term that way.
_UNFOLDED_SCRIPTS = frozenset({"HAN", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO"})
_WORD = re.compile(r"\w+")


@lru_cache(maxsize=8192)  # the characters a server's players type; bounded against a flood of rare ones
def _latin_look_alike(char: str) -> str:
    """`char`'s Latin prototype in UTS #39's confusables table (Cyrillic а: a), case-folded, when
    it is a letter or digit whose prototype is ASCII letters or digits; else `char` itself."""
    if char.isascii() or not _WORD.fullmatch(char) or categories.alias(char) in _UNFOLDED_SCRIPTS:
        return char
    found = confusables.is_confusable(char)
    if not found:
        return char
    # The package lists a character's look-alikes in both directions of the table; an ASCII one
    # listed for a non-ASCII character is its prototype, since the table's ASCII sources
    # (` " | 1 I 0 m) all map to ASCII (and % to a sequence, never one character).
    for glyph in found[0]["homoglyphs"]:
        prototype = str(glyph["c"]).casefold()
        if prototype.isascii() and _WORD.fullmatch(prototype):
            return prototype
    return char


def fold_look_alikes(normalised: str) -> str:
    """`normalise`d text (or a term) with each look-alike letter of another script made the Latin
    letter it imitates (see the module docstring): `bаd` with a Cyrillic а reads `bad`."""
    if normalised.isascii():
        return normalised
    return "".join(_latin_look_alike(char) for char in normalised)


def parse_term(raw: object) -> str:
    """One term, normalised, in AutoMod's wildcard syntax; TermRefused says what is wrong."""
    if not isinstance(raw, str):
        raise TermRefused(str(raw), L_("must be text"))
    term = normalise(raw)
    if len(raw) > TERM_MAX or len(term) > TERM_MAX:
        raise TermRefused(raw, L_("is too long (%(length)s characters; at most %(limit)s)",
                                   length=max(len(raw), len(term)), limit=TERM_MAX))
    core = term.strip("*")
    if not core.strip():
        raise TermRefused(raw, L_("is empty; give a word or phrase (wildcards: *term*, term*, *term)"))
    if "*" in core:
        raise TermRefused(raw, L_("may hold a * only at its start or end (*term*, term*, *term)"))
    if term.startswith("**") or term.endswith("**"):
        raise TermRefused(raw, L_("takes one * at each end at most"))
    if core != core.strip():
        raise TermRefused(raw, L_("may not have spaces next to its *"))
    return term


def _pattern(term: str) -> re.Pattern[str]:
    """The term's pattern over folded text: its core folded too (`fold_look_alikes`)."""
    core = re.escape(fold_look_alikes(term.strip("*"))).replace(r"\ ", " ")
    start = "" if term.startswith("*") else r"(?<!\w)"
    end = "" if term.endswith("*") else r"(?!\w)"
    return re.compile(start + core + end)


@dataclass(frozen=True)
class RuleSet:
    """Terms (and an allow list) under the name a refusal gives them ("the operator's rules")."""

    name: str
    terms: tuple[str, ...]
    allow: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, name: str, terms: Iterable[str], allow: Iterable[str] = ()) -> RuleSet:
        """A rule set from terms not yet validated (an AutoMod rule's): unusable terms are left out."""
        return cls(name, tuple(_usable(terms)), tuple(_usable(allow)))

    @cached_property
    def _blocked(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        return tuple((t, _pattern(t)) for t in self.terms)

    @cached_property
    def _allowed(self) -> tuple[re.Pattern[str], ...]:
        return tuple(_pattern(t) for t in self.allow)

    def first_match(self, normalised: str) -> str | None:
        """The first term (as listed, unfolded) that matches `normalise`d text outside the allow
        list's matches, or None. Terms, allow list and text are compared folded."""
        folded = fold_look_alikes(normalised)  # idempotent: text folded already reads the same
        allowed: list[tuple[int, int]] | None = None
        for term, pattern in self._blocked:
            for m in pattern.finditer(folded):
                if allowed is None:
                    allowed = [a.span() for p in self._allowed for a in p.finditer(folded)]
                if not any(a <= m.start() and m.end() <= b for a, b in allowed):
                    return term
        return None


def _usable(terms: Iterable[str]) -> list[str]:
    out: list[str] = []
    for t in terms:
        try:
            term = parse_term(t)
        except TermRefused:
            continue
        if term not in out:
            out.append(term)
    return out


@dataclass(frozen=True)
class Refusal:
    """Which rule set refused a text, and the term that matched (for the audit log)."""

    rule_set: str
    term: str


def check(text: str | None, rule_sets: Sequence[RuleSet]) -> Refusal | None:
    """The first rule set (in the order given) with a term in `text`, or None when all allow it."""
    normalised = normalise(text)
    if not normalised:
        return None
    for rules in rule_sets:
        term = rules.first_match(normalised)
        if term is not None:
            return Refusal(rules.name, term)
    return None


def check_all(texts: Iterable[str], rule_sets: Sequence[RuleSet]) -> Refusal | None:
    """`check` over several separate texts (an instruction's fields: a phrase never spans two)."""
    for text in texts:
        refusal = check(text, rule_sets)
        if refusal is not None:
            return refusal
    return None
