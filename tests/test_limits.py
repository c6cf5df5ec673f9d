"""Every place that holds a turn to its length and count limits reads settings/limits.py's table:
the settings' defaults and bounds, the range a server may store, /admin limits' options, /act's
and /vote propose's options as Discord lets a member type them, the sanitiser, and the films'
suggestions that Discord's autocomplete sends as an option's value. (The page: tests/play/test_limits.py.)"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from db.guilds import LIMIT_RANGES
from game.catalogue import FILMS
from game.films_file import CatalogueError, parse_films
from game.instruction import FIELD_MAX as INSTRUCTION_FIELD_MAX
from game.instruction import build_instruction
from game.sanitize import InputRefused
from settings import Settings
from settings.limits import FIELD_MAX, OTHERS_MAX, SERVER_LIMITS, SUGGESTION_FIELD
from tests.i18n.test_command_payload import payloads

OPTION_FIELD = {"motion": "motion", "background": "background", "adverb": "adverb", "time": "time_of_day"}


def _bounds(name: str) -> tuple[object, object, object]:
    field = Settings.model_fields[name]
    ge = next(m.ge for m in field.metadata if getattr(m, "ge", None) is not None)
    le = next(m.le for m in field.metadata if getattr(m, "le", None) is not None)
    return field.default, ge, le


@pytest.mark.parametrize("name", sorted(SERVER_LIMITS))
def test_settings_and_the_servers_range_are_the_table(name):
    limit = SERVER_LIMITS[name]
    assert _bounds(name) == (limit.default, limit.low, limit.high)
    assert LIMIT_RANGES[name] == (limit.low, limit.high)
    Settings(_env_file=None, **{name: limit.high})
    with pytest.raises(ValidationError, match=name):
        Settings(_env_file=None, **{name: limit.high + 1})


def test_the_sanitiser_holds_each_field_to_its_cap_as_typed():
    assert INSTRUCTION_FIELD_MAX is FIELD_MAX  # film.manifest reads it from game.instruction
    film = FILMS["qiqi"]
    at_cap = {name: "x" * cap for name, cap in FIELD_MAX.items()}
    build_instruction(film, ["qiqi"], **at_cap)
    for name, cap in FIELD_MAX.items():
        with pytest.raises(InputRefused, match=f"{cap + 1} characters; at most {cap}"):
            build_instruction(film, ["qiqi"], **{**at_cap, name: "y" * (cap + 1)})
    # Counted as typed, as Discord counts it: invisible characters count, even though cleaning drops them.
    with pytest.raises(InputRefused, match="at most 30"):
        build_instruction(film, ["qiqi"], motion="walk", background="sky", adverb="x" * 29 + "\u200b\u200b")
    # Cleaning that lengthens the text (NFKC: one ligature, three letters) never refuses what was typed within the cap.
    ins = build_instruction(film, ["qiqi"], motion="walk", background="sky", adverb="x" * 29 + "\ufb03")
    assert ins.adverb == "x" * 29 + "ffi"


async def test_the_commands_options_are_the_table():
    commands = {c["name"]: c for c in await payloads()}

    def options(*path: str) -> dict[str, dict]:
        node = commands[path[0]]
        for name in path[1:]:
            node = next(o for o in node["options"] if o["name"] == name)
        return {o["name"]: o for o in node["options"]}

    for command in (("act",), ("vote", "propose")):
        opts = options(*command)
        assert {name: opts[name]["max_length"] for name in OPTION_FIELD} == {
            name: FIELD_MAX[field] for name, field in OPTION_FIELD.items()}, command
        assert opts["with"]["max_length"] == OTHERS_MAX, command
    limits = options("admin", "limits")
    for option, name in (("cooldown", "cooldown_seconds"), ("backlog", "backlog_cap"), ("max_length", "max_instruction_len")):
        assert (limits[option]["min_value"], limits[option]["max_value"]) == (SERVER_LIMITS[name].low, SERVER_LIMITS[name].high)


def test_every_suggestion_fits_the_option_it_completes():
    """Autocomplete sends a suggestion as the option's value: a longer one could not be sent."""
    for film in FILMS.values():
        for kind, field in SUGGESTION_FIELD.items():
            assert all(len(term) <= FIELD_MAX[field] for term in getattr(film, kind)), (film.id, kind)
    data = {"films": {"qiqi": {"adverbs": ["x" * (FIELD_MAX["adverb"] + 1)], "motions": ["y" * FIELD_MAX["motion"]]}}}
    with pytest.raises(CatalogueError, match=r"adverbs\[0\]: is too long \(31 characters; at most 30\)"):
        parse_films(data, "test.toml", base=dict(FILMS.items()))
    del data["films"]["qiqi"]["adverbs"]
    assert parse_films(data, "test.toml", base=dict(FILMS.items()))["qiqi"].motions == ("y" * FIELD_MAX["motion"],)
