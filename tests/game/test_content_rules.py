"""The content-rule matcher (game.content_rules): AutoMod's wildcard semantics, the allow list,
normalisation tricks (full-width, zero-width, case), the term bounds, and the operator's file."""

from __future__ import annotations

import pytest

from game.content_rules import (
    MAX_TERMS,
    OPERATOR,
    Refusal,
    RuleSet,
    TermRefused,
    automod_rule_name,
    check,
    check_all,
    parse_term,
)
from game.operator_rules import RulesFileError, packaged_rules, parse_rules, read_rules_file


def rules(*terms: str, allow: tuple[str, ...] = (), name: str = "test") -> list[RuleSet]:
    return [RuleSet.of(name, terms, allow)]


@pytest.mark.parametrize(
    ("term", "text", "hit"),
    [
        ("cat", "a cat!", True),
        ("cat", "cats", False),  # whole word only
        ("cat", "wildcat", False),
        ("cat*", "catapult over", True),  # prefix
        ("cat*", "wildcat", False),
        ("*cat", "wildcat", True),  # suffix
        ("*cat", "catapult", False),
        ("*cat*", "education", True),  # anywhere
        ("*cat*", "dog", False),
        ("bad word", "a bad   word here", True),  # a phrase: whitespace runs are one space
        ("bad word", "bad words", False),
        ("c.a", "cxa", False),  # no regex: punctuation is literal
        ("c.a", "c.a", True),
    ],
)
def test_wildcards(term, text, hit):
    assert (check(text, rules(term)) is not None) is hit


@pytest.mark.parametrize(
    "text",
    [
        "ＢＡＤ move",  # full-width letters fold to plain ones (NFKC)
        "b\u200bad move",  # a zero-width space inside the word
        "b\u00adad move",  # a soft hyphen
        "BaD move",  # case
        "b\u202ead move",  # a bidi override
        "\ufdfa" * 50 + " bad move",  # NFKC makes each of these 18 characters: nothing is cut
    ],
)
def test_normalisation_tricks_do_not_slip_through(text):
    refusal = check(text, rules("bad"))
    assert refusal is not None and refusal.term == "bad" and refusal.rule_set == "test"


def test_terms_are_normalised_too():
    assert check("bad", rules("ＢＡＤ")) is not None
    assert parse_term("  Bad\u200b  Word ") == "bad word"


def test_allow_list():
    sets = rules("*cat*", allow=("education",))
    assert check("an education", sets) is None
    assert check("an education and a cat", sets) is not None
    assert check("sussex", rules("sex*", allow=("sussex",))) is None
    assert check("sex", rules("sex*", allow=("sussex",))) is not None


def test_the_first_refusing_rule_set_is_named():
    sets = [RuleSet.of(OPERATOR, ["x*"]), RuleSet.of("this server's filter", ["walk"])]
    assert check("walk", sets) == Refusal("this server's filter", "walk")
    assert check("xylophone walk", sets) == Refusal(OPERATOR, "x*")
    assert check("", sets) is None and check(None, sets) is None
    assert check_all(["fly", "walk home"], sets) == Refusal("this server's filter", "walk")
    assert automod_rule_name("No\u200b slurs") == "this server's AutoMod rule No slurs"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "is empty"),
        ("*", "is empty"),
        ("**", "is empty"),
        ("a*b", "only at its start or end"),
        ("**ab", "one * at each end"),
        ("* ab", "spaces next to its *"),
        ("x" * 61, "is too long (61 characters; at most 60)"),
        (5, "must be text"),
    ],
)
def test_bad_terms(raw, reason):
    with pytest.raises(TermRefused) as e:
        parse_term(raw)
    assert reason in e.value.reason


def test_unusable_automod_terms_are_left_out():
    (rs,) = rules("ok", "a*b", "")
    assert rs.terms == ("ok",)


def test_operator_file(tmp_path):
    good = tmp_path / "rules.toml"
    good.write_text('terms = ["Foo*", "*bar"]\nallow = ["foobar"]\n', encoding="utf-8")
    rs = read_rules_file(good)
    assert rs.name == OPERATOR and rs.terms == ("foo*", "*bar") and rs.allow == ("foobar",)

    bad = tmp_path / "bad.toml"
    bad.write_text('terms = ["a*b", "ok", "OK"]\nallow = "x"\nextra = 1\n', encoding="utf-8")
    with pytest.raises(RulesFileError) as e:
        read_rules_file(bad)
    problems = "\n".join(e.value.problems)
    assert f"{bad}: extra: unknown key" in problems
    assert "terms[1] 'a*b': may hold a * only at its start or end" in problems
    assert "terms[3] 'OK': listed twice" in problems
    assert "allow: must be a list of strings" in problems

    with pytest.raises(RulesFileError, match="has 1001 entries; at most 1000"):
        parse_rules({"terms": [f"t{i}" for i in range(MAX_TERMS + 1)]}, "big.toml")
    with pytest.raises(RulesFileError, match="does not exist"):
        read_rules_file(tmp_path / "missing.toml")
    (tmp_path / "broken.toml").write_text("terms = [", encoding="utf-8")
    with pytest.raises(RulesFileError, match="not valid TOML"):
        read_rules_file(tmp_path / "broken.toml")


def test_packaged_rules_are_valid_and_modest():
    rs = packaged_rules()
    assert rs.name == OPERATOR and 0 < len(rs.terms) <= 100
    assert check("Qiqi flies on her broomstick over the night sky", [rs]) is None
    assert check("quickly fly, Essex at night", [rs]) is None  # whole words: no Scunthorpe problem


def test_content_rules_check_command(tmp_path, capsys):
    from animegamer.cli import main

    good = tmp_path / "rules.toml"
    good.write_text('terms = ["foo*"]\n', encoding="utf-8")
    assert main(["content-rules", "check", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: valid; 1 blocked term(s), 0 allowed\n"
    bad = tmp_path / "bad.toml"
    bad.write_text('terms = ["f*o"]\n', encoding="utf-8")
    assert main(["content-rules", "check", str(bad)]) == 1
    assert capsys.readouterr().err == (
        f"animegamer content-rules check: 1 problem(s):\n  {bad}: terms[1] 'f*o': may hold a * only at its start or end (*term*, term*, *term)\n"
    )
