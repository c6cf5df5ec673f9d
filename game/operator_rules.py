"""The operator's content rules: the packaged list (game/content_rules.toml) or the file named by
the `content_rules` setting (ANIMEGAMER_CONTENT_RULES), which replaces it.

I/O: read once per process, like the film catalogue (game.catalogue): the commands call
`game.catalogue.load_checked_settings()` at start, which loads and validates this file too, so a
bad file stops the program with problems naming the file, the list and the entry. Validation
works on the parsed tables (`parse_rules`) and is what `animegamer content-rules check` runs.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from game.content_rules import MAX_ALLOW, MAX_TERMS, OPERATOR, RuleSet, TermRefused, parse_term
from game.toml_files import read_toml

PACKAGED = "game/content_rules.toml"  # how the shipped file is named in messages
LISTS = {"terms": MAX_TERMS, "allow": MAX_ALLOW}


class RulesFileError(ValueError):
    """A rules file that cannot be used; each line names the file, the list and the entry."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def parse_rules(data: Mapping, source: str) -> RuleSet:
    """The operator's rule set from one parsed file; RulesFileError lists every problem."""
    problems: list[str] = []
    for key in sorted(set(data) - set(LISTS)):
        problems.append(f"{source}: {key}: unknown key (a rules file holds `terms` and `allow`)")
    if "terms" not in data:
        problems.append(f"{source}: terms: missing (a list of words and phrases; an empty list blocks nothing)")
    lists: dict[str, list[str]] = {}
    for key, cap in LISTS.items():
        values = data.get(key, [])
        if not isinstance(values, list):
            problems.append(f"{source}: {key}: must be a list of strings")
            continue
        if len(values) > cap:
            problems.append(f"{source}: {key}: has {len(values)} entries; at most {cap}")
        lists[key] = []
        for i, raw in enumerate(values, 1):
            try:
                term = parse_term(raw)
            except TermRefused as e:
                problems.append(f"{source}: {key}[{i}] {e.term!r}: {e.reason}")
                continue
            if term in lists[key]:
                problems.append(f"{source}: {key}[{i}] {raw!r}: listed twice")
            else:
                lists[key].append(term)
    if problems:
        raise RulesFileError(problems)
    return RuleSet(OPERATOR, tuple(lists["terms"]), tuple(lists.get("allow", ())))


def read_rules_file(path: str | Path) -> RuleSet:
    path = Path(path)
    data = read_toml(path, "content rules file", RulesFileError)
    return parse_rules(data, str(path))


def packaged_rules() -> RuleSet:
    text = resources.files("game").joinpath("content_rules.toml").read_text(encoding="utf-8")
    return parse_rules(tomllib.loads(text), PACKAGED)


def load_rules(operator_file: str | Path | None) -> RuleSet:
    """The operator's file when one is named (it replaces the packaged list), else the packaged list."""
    return read_rules_file(operator_file) if operator_file else packaged_rules()


_active: RuleSet | None = None


def use_rules(rules: RuleSet | None) -> None:
    """Make `rules` the process's operator rules (None: load them again from the settings on next use)."""
    global _active
    _active = rules


def operator_rules() -> RuleSet:
    """The process's operator rules, loaded from the settings on first use."""
    global _active
    if _active is None:
        from settings import load_settings

        _active = load_rules(load_settings().content_rules)
    return _active
