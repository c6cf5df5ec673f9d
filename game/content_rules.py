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
removed, whitespace runs made one space; then case-folded. So `ＢＡＤ`, `b\u200bad` and `BAD`
all read `bad`. Regular expressions are not supported (a pattern's cost cannot be bounded with
Python's backtracking `re`); AutoMod's `regex_patterns` are therefore skipped (see docs/bot.md).

Bounds are AutoMod's own: at most 1,000 terms per rule set, 100 allow-list entries, 60
characters per term. `parse_term` is the one validation of a term, used by the operator's file,
by `/admin filter add` and for AutoMod's rules.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from game.sanitize import clean_text

MAX_TERMS = 1000  # AutoMod: keyword_filter holds at most 1,000 keywords
MAX_ALLOW = 100  # AutoMod: allow_list of a keyword rule holds at most 100 entries
TERM_MAX = 60  # AutoMod: each keyword at most 60 characters

NEUTRAL_NAME = "a player"  # shown instead of a display name a rule set refuses
OPERATOR = "the operator's rules"
SERVER_FILTER = "this server's filter"


def automod_rule_name(name: str) -> str:
    """How a server's AutoMod rule is named in a refusal."""
    return f"this server's AutoMod rule {clean_text(name, 100) or 'without a name'}"


class TermRefused(ValueError):
    """A term that cannot be used; `reason` says why, worded for the person who typed it."""

    def __init__(self, term: str, reason: str):
        super().__init__(f"{term!r}: {reason}")
        self.term = term
        self.reason = reason


def normalise(text: str | None) -> str:
    """Text as the rules see it: game.sanitize's cleaning (NFKC, invisible characters dropped,
    whitespace runs made one space), case-folded."""
    if not text:
        return ""
    return clean_text(text, sys.maxsize).casefold()  # never cut: NFKC can make text many times longer


def parse_term(raw: object) -> str:
    """One term, normalised, in AutoMod's wildcard syntax; TermRefused says what is wrong."""
    if not isinstance(raw, str):
        raise TermRefused(str(raw), "must be text")
    term = normalise(raw)
    if len(raw) > TERM_MAX or len(term) > TERM_MAX:
        raise TermRefused(raw, f"is too long ({max(len(raw), len(term))} characters; at most {TERM_MAX})")
    core = term.strip("*")
    if not core.strip():
        raise TermRefused(raw, "is empty; give a word or phrase (wildcards: *term*, term*, *term)")
    if "*" in core:
        raise TermRefused(raw, "may hold a * only at its start or end (*term*, term*, *term)")
    if term.startswith("**") or term.endswith("**"):
        raise TermRefused(raw, "takes one * at each end at most")
    if core != core.strip():
        raise TermRefused(raw, "may not have spaces next to its *")
    return term


def _pattern(term: str) -> re.Pattern[str]:
    core = re.escape(term.strip("*")).replace(r"\ ", " ")
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
        """The first term that matches outside the allow list's matches, or None."""
        allowed: list[tuple[int, int]] | None = None
        for term, pattern in self._blocked:
            for m in pattern.finditer(normalised):
                if allowed is None:
                    allowed = [a.span() for p in self._allowed for a in p.finditer(normalised)]
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
