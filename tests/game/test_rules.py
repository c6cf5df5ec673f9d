"""Pure game rules: instruction text, states, motion scope, catalogue."""

from __future__ import annotations

import pytest

from game.catalogue import FILMS, get_film, suggest
from game.errors import UnknownFilm
from game.instruction import build_instruction, format_instruction
from game.motion import motion_scope
from game.sanitize import InputRefused
from game.states import CharacterState, Prediction, apply, bar, describe

QIQI = FILMS["qiqi"]


def test_instruction_text_matches_training_format():
    assert (
        format_instruction(["Qiqi"], "fly on broomstick", "quickly", "sky", "night")
        == "Character: Qiqi; Motion: quickly fly on broomstick; Background: night sky."
    )


def test_instruction_without_optional_parts_has_no_double_spaces():
    assert format_instruction(["Qiqi", "Jiji"], "walk", "", "town", "") == "Character: Qiqi, Jiji; Motion: walk; Background: town."


def test_build_instruction_resolves_ids_and_names():
    ins = build_instruction(QIQI, ["qiqi", "Jiji", "QIQI"], "hold broom", "street", "gently", "day")
    assert ins.characters == ("Qiqi", "Jiji")
    assert ins.character_ids == ("qiqi", "jiji")
    assert ins.text == "Character: Qiqi, Jiji; Motion: gently hold broom; Background: day street."


def test_build_instruction_refusals():
    with pytest.raises(InputRefused, match="not a character"):
        build_instruction(QIQI, ["Ponyo"], "swim", "sea")
    with pytest.raises(InputRefused, match="not playable"):
        build_instruction(QIQI, ["tombo"], "walk", "town", playable={"qiqi"})
    with pytest.raises(InputRefused, match="at least one character"):
        build_instruction(QIQI, [], "walk", "town")
    with pytest.raises(InputRefused, match="motion: is empty"):
        build_instruction(QIQI, ["qiqi"], "  ", "town")
    with pytest.raises(InputRefused, match="instruction: is too long"):
        build_instruction(QIQI, ["qiqi"], "w" * 80, "b" * 80, max_len=100)


def test_build_instruction_strips_tokens_and_reports():
    ins = build_instruction(QIQI, ["qiqi"], "fly <TURN>", "sky</s>")
    assert ins.text == "Character: Qiqi; Motion: fly; Background: sky."
    assert any("reserved" in n for n in ins.notes)


@pytest.mark.parametrize(
    ("start", "delta", "expected"),
    [(50, 0, 50), (50, 1, 55), (50, -2, 40), (95, 3, 100), (5, -5, 0), (100, 5, 100), (0, -1, 0)],
)
def test_state_moves_by_five_per_unit_and_clamps(start, delta, expected):
    s = CharacterState(stamina=start, social=start, entertainment=start)
    out = apply(s, Prediction(motion_level=3, social=delta, entertainment=delta, stamina=delta))
    assert out == CharacterState(expected, expected, expected)


def test_states_start_at_fifty():
    assert CharacterState() == CharacterState(50, 50, 50)


def test_prediction_range_is_checked():
    with pytest.raises(ValueError, match="-5..5"):
        Prediction(6, 0, 0, 0)
    assert Prediction.from_sequence([1, -2, 3, -4]).as_tuple() == (1, -2, 3, -4)


@pytest.mark.parametrize(("level", "scope"), [(1, 0.5), (2, 2.5), (3, 10.0), (4, 15.0), (5, 40.0), (0, 40.0), (-3, 40.0)])
def test_motion_scope_batch_script_mapping(level, scope):
    assert motion_scope(level) == scope


def test_motion_scope_is_configurable():
    assert motion_scope(2, {2: 7.0}, otherwise=1.0) == 7.0
    assert motion_scope(3, {2: 7.0}, otherwise=1.0) == 1.0


def test_bars():
    assert bar(70) == "███████░░░"
    assert describe("stamina", 60, 70) == "Stamina ███████░░░ 70 (+10)"
    assert describe("social", None, 0) == "Social ░░░░░░░░░░ 0"


def test_catalogue_has_both_films_with_unique_ids():
    assert {"qiqi", "ponyo"} <= set(FILMS)
    for f in FILMS.values():
        ids = [c.id for c in f.characters]
        assert len(ids) == len(set(ids))
        assert f.motions and f.backgrounds and f.times
    with pytest.raises(UnknownFilm, match="Choose ponyo or qiqi"):
        get_film("totoro")


def test_suggest_prefix_first_and_capped():
    out = suggest(("walk", "sidewalk", "run"), "walk")
    assert out == ["walk", "sidewalk"]
    assert len(suggest(tuple(str(i) for i in range(100)), "")) == 25
