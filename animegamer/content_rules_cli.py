"""`animegamer content-rules check FILE`: validate an operator's content rules file (the form of
game/content_rules.toml) before naming it in ANIMEGAMER_CONTENT_RULES."""

from __future__ import annotations

import sys

from game.operator_rules import RulesFileError, read_rules_file


def _check(args) -> int:
    try:
        rules = read_rules_file(args.file)
    except RulesFileError as e:
        print(f"animegamer content-rules check: {len(e.problems)} problem(s):", file=sys.stderr)
        for p in e.problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"{args.file}: valid; {len(rules.terms)} blocked term(s), {len(rules.allow)} allowed")
    return 0


def register(sub) -> None:
    p = sub.add_parser("content-rules", help="the operator's blocked terms: check a rules file")
    csub = p.add_subparsers(dest="content_rules_command", required=True)
    ck = csub.add_parser("check", help="validate a content rules file (TOML: terms, allow)")
    ck.add_argument("file", help="path to the rules file")
    ck.set_defaults(func=_check)
