"""The film catalogue as data: the packaged TOML, an operator's file laid over it, validation."""

from __future__ import annotations

import pytest

from game.catalogue import (
    FILMS,
    PACKAGED,
    CatalogueError,
    display_film,
    load_catalogue,
    load_checked_settings,
    packaged_films,
    parse_films,
    session_film,
    use_films,
)
from game.errors import FilmWithdrawn
from settings import SettingsError


@pytest.fixture(autouse=True)
def _fresh_catalogue():
    use_films(None)
    yield
    use_films(None)


def test_packaged_catalogue_holds_the_released_films():
    films = packaged_films()
    assert list(films) == ["qiqi", "ponyo"]
    qiqi = films["qiqi"]
    assert (qiqi.mllm_checkpoint, qiqi.decoder_checkpoint, qiqi.hub_repo) == ("MLLM-Qiqi", "VDM_Decoder-Qiqi", "TencentARC/AnimeGamer")
    assert [c.name for c in qiqi.characters] == ["Qiqi", "Jiji", "Tombo", "Osono", "Ursula"]
    assert "fly on broomstick" in qiqi.motions and qiqi.source == PACKAGED
    assert films["ponyo"].character("sosuke").name == "Sosuke"


OPERATOR = """
[films.qiqi]
characters = [{ id = "qiqi", name = "Kiki" }, { id = "jiji", name = "Jiji" }]
mllm_checkpoint = "MLLM-Qiqi-v2"

[films.ponyo]
enabled = false

[films.mononoke]
title = "Princess Mononoke"
mllm_checkpoint = "MLLM-Mononoke"
decoder_checkpoint = "VDM_Decoder-Mononoke"
characters = [{ id = "san", name = "San" }, { id = "ashitaka", name = "Ashitaka" }]
motions = ["ride a wolf", "run"]
"""


def test_operator_file_adds_overrides_and_withdraws(tmp_path):
    path = tmp_path / "films.toml"
    path.write_text(OPERATOR)
    films = load_catalogue(path)
    assert list(films) == ["qiqi", "mononoke"]
    qiqi = films["qiqi"]
    assert [c.name for c in qiqi.characters] == ["Kiki", "Jiji"]  # renamed cast, same ids
    assert qiqi.mllm_checkpoint == "MLLM-Qiqi-v2" and qiqi.decoder_checkpoint == "VDM_Decoder-Qiqi"
    assert qiqi.motions == packaged_films()["qiqi"].motions  # fields not set are kept
    assert qiqi.source == str(path)
    new = films["mononoke"]
    assert new.hub_repo is None and new.motions == ("ride a wolf", "run") and new.times == ()


@pytest.mark.parametrize(
    "table, where",
    [
        ('[films.x]\ntitle = "X"\nmllm_checkpoint = "M"\ndecoder_checkpoint = "D"', "film 'x': characters: missing"),
        ('[films.qiqi]\ncharacters = [{ id = "qiqi", name = "Qi<qi" }]', "film 'qiqi': characters[0].name:"),
        ('[films.qiqi]\ncharacters = [{ id = "qiqi", name = "A, B" }]', "film 'qiqi': characters[0].name: must not contain"),
        ('[films.qiqi]\ncharacters = [{ id = "a", name = "A" }, { id = "a", name = "B" }]', "film 'qiqi': characters[1].id: 'a' appears twice"),
        ('[films.qiqi]\ncharacters = [{ id = "a", name = "A", age = 3 }]', "film 'qiqi': characters[0].age: unknown field"),
        ('[films.qiqi]\ncharacters = []', "film 'qiqi': characters: must be a non-empty list"),
        ('[films.qiqi]\nmllm_checkpoint = "../etc"', "film 'qiqi': mllm_checkpoint: must be a folder name"),
        ('[films.qiqi]\nhub_repo = "nope"', "film 'qiqi': hub_repo: must be a hub repository"),
        ('[films.qiqi]\nmotions = ["<Strength_3>"]', "film 'qiqi': motions[0]:"),
        ('[films.qiqi]\ntitel = "typo"', "film 'qiqi': titel: unknown field"),
        ('[films.qiqi]\nenabled = "no"', "film 'qiqi': enabled: must be true or false"),
        ('[films."Bad Id"]\ntitle = "x"', "film 'Bad Id': id: must be lowercase"),
        ('[film.qiqi]\ntitle = "x"', "film: unknown top-level key"),
    ],
)
def test_every_problem_names_file_film_and_field(tmp_path, table, where):
    path = tmp_path / "ops.toml"
    path.write_text(table)
    with pytest.raises(CatalogueError) as e:
        load_catalogue(path)
    assert f"{path}: {where}" in str(e.value)


def test_all_problems_are_listed_at_once():
    with pytest.raises(CatalogueError) as e:
        parse_films({"films": {"qiqi": {"title": ""}, "ponyo": {"motions": "swim"}}}, "ops.toml", packaged_films())
    assert e.value.problems == [
        "ops.toml: film 'qiqi': title: must be a non-empty string",
        "ops.toml: film 'ponyo': motions: must be a list of strings",
    ]


def test_unreadable_files_are_named(tmp_path):
    with pytest.raises(CatalogueError, match="nothere.toml: the films file does not exist"):
        load_catalogue(tmp_path / "nothere.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[films.qiqi\n")
    with pytest.raises(CatalogueError, match="bad.toml: not valid TOML"):
        load_catalogue(bad)


def test_settings_load_the_operator_file_at_start(tmp_path, monkeypatch):
    path = tmp_path / "films.toml"
    path.write_text(OPERATOR)
    monkeypatch.setenv("ANIMEGAMER_FILMS", str(path))
    settings = load_checked_settings()
    assert settings.films == path
    assert set(FILMS) == {"qiqi", "mononoke"}
    # The default film must be in the catalogue the operator file leaves.
    monkeypatch.setenv("ANIMEGAMER_DEFAULT_FILM", "ponyo")
    with pytest.raises(SettingsError, match="ANIMEGAMER_DEFAULT_FILM: unknown film 'ponyo'; known: mononoke, qiqi"):
        load_checked_settings()
    path.write_text('[films.qiqi]\ncharacters = "Qiqi"\n')
    with pytest.raises(SettingsError) as e:
        load_checked_settings()
    assert f"ANIMEGAMER_FILMS):\n  {path}: film 'qiqi': characters: must be a non-empty list" in str(e.value)


def test_a_withdrawn_film_is_reported_not_a_crash():
    use_films({k: v for k, v in packaged_films().items() if k != "ponyo"})
    with pytest.raises(FilmWithdrawn, match="'ponyo' is no longer offered"):
        session_film("ponyo")
    stand_in = display_film("ponyo")
    assert stand_in.title == "ponyo (withdrawn)" and stand_in.character("sosuke") is None
    assert session_film("qiqi") is FILMS["qiqi"]


def test_film_selection_of_the_worker_command():
    from game.catalogue import film_selection
    from game.errors import UnknownFilm

    assert film_selection(None) is None and film_selection([]) is None
    assert film_selection(["all"]) == ["qiqi", "ponyo"]
    assert film_selection(["ponyo,qiqi"]) == ["ponyo", "qiqi"]
    assert film_selection(["qiqi", "qiqi, ponyo"]) == ["qiqi", "ponyo"]
    with pytest.raises(UnknownFilm, match="'totoro'"):
        film_selection(["qiqi,totoro"])
