"""The content-rule matcher (game.content_rules): AutoMod's wildcard semantics, the allow list,
normalisation tricks (full-width, zero-width, case, look-alike letters of other scripts), the term
bounds, and the operator's file."""

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


# Look-alike letters of other scripts (UTS #39 confusables, game.content_rules.fold_look_alikes).


@pytest.mark.parametrize(
    ("term", "text"),
    [
        ("bad", "a b\u0430d move"),  # Cyrillic а (U+0430)
        ("sex", "\u0455\u0435\u0445"),  # Cyrillic ѕ е х: a whole word of another script
        ("box", "the b\u03bfx"),  # Greek ο (omicron)
        ("porn*", "\u0440\u043ernography"),  # Cyrillic р о before a Latin rest: prefix rule kept
        ("*cat*", "edu\u0441\u0251tion"),  # Cyrillic с, Latin alpha ɑ: anywhere rule kept
        ("bad word", "b\u0430d   w\u03bfrd"),  # a phrase: whitespace runs are still one space
    ],
)
def test_look_alike_letters_in_the_text_match_a_latin_term(term, text):
    refusal = check(text, rules(term))
    assert refusal is not None and refusal.term == parse_term(term)


def test_look_alikes_keep_the_word_boundaries():
    assert check("b\u0430ds", rules("bad")) is None  # still a whole-word term: "bads" is another word
    assert check("wildc\u0430t", rules("cat")) is None
    assert check("wildc\u0430t", rules("*cat")) == Refusal("test", "*cat")


def test_a_look_alike_in_the_term_matches_plain_text():
    (rs,) = rules("b\u0430d")  # typed with a Cyrillic а
    assert rs.terms == ("b\u0430d",)  # kept and shown as typed
    assert check("a bad move", [rs]) == Refusal("test", "b\u0430d")
    assert check("a BAD move", [rs]) is not None
    assert check("a bed move", [rs]) is None
    assert check("the b\u03bfx", rules("b\u043ex")) is not None  # Greek ο in text, Cyrillic о in term


def test_a_russian_term_still_matches_russian_text_only():
    sets = rules("сука", "дурак*")
    assert check("Ты сука!", sets) == Refusal("test", "сука")
    assert check("СУКА", sets) is not None  # case-folded as before
    assert check("ну ты и дураки", sets) == Refusal("test", "дурак*")
    assert check("ты сукa", sets) is not None  # a Latin a typed inside the Russian word
    assert check("сукин сын", sets) is None  # whole word only, as for Latin terms
    # Nothing is transliterated: unrelated Latin text, and a romanisation, do not match.
    assert check("durak suka", sets) is None
    assert check("the cat sat on the mat", sets) is None
    # Russian text without look-alike words does not meet Latin terms.
    assert check("Кот сидит на окне и смотрит на птиц", rules("cot", "kot", "*ha*", "ha")) is None


def test_japanese_and_chinese_text_do_not_meet_latin_terms():
    # IDEOGRAPHIC NUMBER ZERO is O's look-alike in the confusables table; Han is left unfolded.
    assert check("〇〇さんは空を飛ぶ", rules("*oo*", "o*")) is None
    assert check("ノ", rules("*/*")) is None  # katakana NO is /'s look-alike, and no word character
    from game.operator_rules import packaged_rules

    operator = [packaged_rules()]
    for text in (
        "魔女の少女がほうきに乗って夜空を飛ぶ",
        "セクシーな服ではなく、制服を着て学校へ行く",
        "小女孩骑着扫帚飞过夜空",
        "고양이가 창문 옆에 앉아 있다",
        "Ο σκύλος τρέχει στο πάρκο",
        "Кошка спит на диване, а собака лает",
    ):
        assert check(text, operator) is None, text


def test_allow_list_with_look_alikes():
    sets = rules("*cat*", allow=("education",))
    assert check("an \u0435ducation", sets) is None  # the allowed word written with a Cyrillic е
    assert check("an educ\u0430tion", sets) is None  # the look-alike inside the blocked part
    assert check("an educ\u0430tion and a c\u0430t", sets) == Refusal("test", "*cat*")
    sets = rules("sex*", allow=("\u0455ussex",))  # a look-alike in the allow list itself
    assert check("sussex", sets) is None
    assert check("\u0455\u0435x", sets) is not None


def test_every_trick_at_once():
    # full-width Ｂ, a zero-width space, capitals, Cyrillic А (capital, case-folded to а), Greek Δ
    # unfolded (no Latin look-alike) and a bidi override, around a Cyrillic о.
    text = "ＳＴＯＰ Ｂ\u200b\u0410\u202eD w\u041erd!"
    assert check(text, rules("bad word")) == Refusal("test", "bad word")
    assert check("ＢΔD", rules("bad")) is None


def test_fold_look_alikes():
    from game.content_rules import fold_look_alikes, normalise

    assert fold_look_alikes("pomegranate 1 0 i") == "pomegranate 1 0 i"  # ASCII is never rewritten
    assert check("a pomegranate", rules("porn*")) is None  # (UTS #39's full skeleton reads m as rn)
    assert fold_look_alikes(normalise("Ѕ\u0415Х")) == "sex"
    assert fold_look_alikes("дурак") == "дypaк"  # у р а have Latin look-alikes, д and к none
    assert fold_look_alikes("〇ノ") == "〇ノ"
    folded = fold_look_alikes("b\u0430d")
    assert fold_look_alikes(folded) == folded == "bad"  # idempotent
