"""The films' suggestions in the member's language (game/vocabulary.py): shown through the catalogs
with their contexts, turned back into the English the model knows, and extracted for translators."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog

from game import vocabulary
from game.catalogue import packaged_films
from i18n import locales, use_locale
from tests.i18n.helpers import catalogs_in, write_catalog

FILMS = packaged_films()
QIQI, PONYO = FILMS["qiqi"], FILMS["ponyo"]

JA = {
    ("motion", "fly on broomstick"): "ほうきで飛ぶ",
    ("motion", "run"): "走る",
    ("adverb", "quickly"): "すばやく",
    ("background", "sky"): "空",
    ("background", "clock tower"): "時計塔",
    ("time of day", "night"): "夜",
    ("time of day", "evening"): "夕方",
}
FR = {("motion", "run"): "courir", ("background", "sky"): "ciel", ("time of day", "night"): "nuit"}


def catalog(locale: str, entries: dict[tuple[str, str], str]) -> Catalog:
    po = Catalog(locale=locale, domain=locales.DOMAIN)
    for (context, term), text in entries.items():
        po.add(term, text, context=context)
    return po


@pytest.fixture
def shipped(tmp_path: Path) -> Iterator[Path]:
    """A ja and a fr catalog translating a few suggestions, in a temporary LOCALES_DIR."""
    root = tmp_path / "locales"
    root.mkdir()
    with catalogs_in(root):
        write_catalog(root, "ja", catalog("ja", JA))
        write_catalog(root, "fr", catalog("fr", FR))
        yield root


def test_shown_translates_each_kind_with_its_context(shipped):
    with use_locale("ja"):
        assert vocabulary.shown("motions", "fly on broomstick") == "ほうきで飛ぶ"
        assert vocabulary.shown("motion", "fly on broomstick") == "ほうきで飛ぶ"  # the context works as the kind
        assert vocabulary.shown("times", "night") == "夜"
        assert vocabulary.shown("backgrounds", "night") == "night"  # another context: not translated
        assert vocabulary.shown("adverbs", "slowly") == "slowly"  # untranslated: English
    with use_locale("en"):
        assert vocabulary.shown("motions", "fly on broomstick") == "fly on broomstick"
    with pytest.raises(ValueError, match="unknown vocabulary kind"):
        vocabulary.shown("moods", "happy")


def test_a_suggestion_typed_in_any_language_goes_to_the_model_in_english(shipped):
    with use_locale("ja"):
        for kind in vocabulary.KINDS:  # round trip: every term as shown comes back as the term
            for term in vocabulary.terms_of(QIQI, kind):
                assert vocabulary.to_model(kind, vocabulary.shown(kind, term), QIQI) == term
        assert vocabulary.to_model("motions", "ほうきで飛ぶ", QIQI) == "fly on broomstick"
        assert vocabulary.to_model("backgrounds", " 時計塔 ", QIQI) == "clock tower"
        assert vocabulary.to_model("backgrounds", "ciel", QIQI) == "sky"  # another shipped locale's
        assert vocabulary.to_model("motions", "FLY ON  BROOMSTICK", QIQI) == "fly on broomstick"  # English, any case
        assert vocabulary.to_model("motions", "ＲＵＮ", PONYO) == "run"  # full-width
        assert vocabulary.to_model("motions", "空を飛ぶ", QIQI) == "空を飛ぶ"  # free text: as typed
        assert vocabulary.to_model("backgrounds", "夜", QIQI) == "夜"  # a time of day is not a background
        assert vocabulary.to_model("motions", "ほうきで飛ぶ", PONYO) == "ほうきで飛ぶ"  # not Ponyo's suggestion
        assert vocabulary.to_model("motions", "", QIQI) == ""
        assert vocabulary.to_model("motions", "走る", None) == "走る"  # no film: nothing to map
    with use_locale("en"):  # whatever the member's language, every shipped one is understood
        assert vocabulary.to_model("times", "夕方", QIQI) == "evening"
        assert vocabulary.to_model("times", "nuit", PONYO) == "night"


def test_the_instruction_s_fields_in_one_call(shipped):
    assert vocabulary.fields_to_model(QIQI, "ほうきで飛ぶ", "空", "すばやく", "夜") == ("fly on broomstick", "sky", "quickly", "night")
    assert vocabulary.fields_to_model(QIQI, "踊る", "ciel") == ("踊る", "sky", "", "")


def test_is_term(shipped):
    assert vocabulary.is_term("ほうきで飛ぶ", [QIQI]) and vocabulary.is_term("Sky", [QIQI])
    assert not vocabulary.is_term("ほうきで飛ぶ", [PONYO]) and not vocabulary.is_term("dance", FILMS.values())


def test_without_catalogs_the_terms_are_english():
    assert vocabulary.shown("motions", "swim") == "swim"
    assert vocabulary.to_model("motions", " Swim ", PONYO) == "swim"


def test_the_packaged_films_vocabulary_is_listed_once_with_its_contexts():
    found = vocabulary.messages()
    assert len(found) == len(set(found))
    assert ("motion", "fly on broomstick") in found and ("motion", "ride the waves") in found
    assert ("adverb", "quickly") in found and ("background", "clock tower") in found and ("time of day", "sunset") in found
    for film in FILMS.values():
        for kind in vocabulary.KINDS:
            for term in vocabulary.terms_of(film, kind):
                assert (vocabulary.context_of(kind), term) in found
    assert [t for c, t in found if c == "motion"].count("run") == 1  # in both films, listed once
    assert vocabulary.messages('[films.x]\nmotions = ["sail"]\ntimes = ["dawn", "dawn"]\n') == [
        ("motion", "sail"), ("time of day", "dawn")]


def test_extract_adds_the_vocabulary_to_the_template(monkeypatch):
    from animegamer import i18n_cli

    async def no_commands():  # the slash commands' strings are another test's (tests/i18n)
        return []

    monkeypatch.setattr(i18n_cli, "_command_strings", no_commands)
    pot = i18n_cli.template()
    m = pot.get("fly on broomstick", context="motion")
    assert m is not None and ("game/films.toml", 0) in m.locations and "model receives the English" in m.auto_comments[0]
    assert pot.get("night", context="time of day") is not None and pot.get("sky", context="background") is not None
    assert pot.get("night", context="motion") is None
