"""Bad input to `animegamer eval`: one clear line naming the file and line, status 2, no traceback,
nothing played."""

from __future__ import annotations

import json

import pytest

from animegamer.cli import main
from testkit.evaluation_set import GAMES, write_games, write_references

GOOD_TURN = GAMES[0]["turns"][0]


def _eval(games, refs, out, capsys, film="qiqi") -> tuple[int, str]:
    rc = main(["eval", "--film", film, "--games", str(games), "--out", str(out), "--references", str(refs),
               "--backend", "preview", "--no-progress"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err


@pytest.fixture
def refs(tmp_path):
    return write_references(tmp_path / "refs")


def _lines(tmp_path, *lines: str):
    path = tmp_path / "games.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


GOOD = json.dumps(GAMES[0])


@pytest.mark.parametrize(("line2", "words"), [
    ("{not json", "line 2: not JSON"),
    (json.dumps({"id": "x", "character": "qiqi", "turns": []}), "line 2: no turns"),
    (json.dumps({"id": "x", "character": "qiqi", "turns": [{**GOOD_TURN, "motion_level": 7}]}),
     "line 2, turn 1: motion_level must be a whole number 1-5, got 7"),
    (json.dumps({"id": "x", "character": "qiqi", "turns": [{**GOOD_TURN, "social": "1"}]}),
     "line 2, turn 1: social must be a whole number -5..5"),
    (json.dumps({"id": "x", "character": "qiqi", "turns": [{**GOOD_TURN, "instruction": "fly away"}]}),
     "line 2, turn 1: the instruction 'fly away' is not in the game's form"),
    (GOOD, "line 2: game id 'g1' is already used on line 1"),
])
def test_a_games_file_that_does_not_parse(tmp_path, refs, capsys, line2, words):
    rc, err = _eval(_lines(tmp_path, GOOD, line2), refs, tmp_path / "out", capsys)
    assert rc == 2 and words in err, err
    assert not (tmp_path / "out").exists()


def test_unknown_film(tmp_path, refs, capsys):
    rc, err = _eval(write_games(tmp_path / "g.jsonl"), refs, tmp_path / "out", capsys, film="nope")
    assert rc == 2 and "--film nope: no such film (known: " in err and "qiqi" in err


def test_a_character_outside_the_cast(tmp_path, refs, capsys):
    games = _lines(tmp_path, GOOD, json.dumps({**GAMES[1], "character": "totoro", "id": "t"}))
    rc, err = _eval(games, refs, tmp_path / "out", capsys)
    assert rc == 2 and "line 2: character 'totoro' is not in the cast of" in err and "qiqi, jiji" in err


def test_missing_reference_images(tmp_path, capsys):
    games = write_games(tmp_path / "g.jsonl")
    rc, err = _eval(games, write_references(tmp_path / "refs", ids=("qiqi",)), tmp_path / "out", capsys)
    assert rc == 2 and "line 2: no reference image of character 'jiji'" in err
    (tmp_path / "refs" / "jiji.png").write_text("not an image")
    rc, err = _eval(games, tmp_path / "refs", tmp_path / "out", capsys)
    assert rc == 2 and "line 2: reference image" in err and "cannot be read" in err
    rc = main(["eval", "--film", "qiqi", "--games", str(games), "--out", str(tmp_path / "out"), "--backend", "preview"])
    err = capsys.readouterr().err
    assert rc == 2 and "no reference images" in err and "--references DIR" in err  # no film folder beside it


def test_no_held_out_games_and_missing_options(tmp_path, refs, capsys):
    games = _lines(tmp_path, json.dumps(GAMES[2]))
    rc, err = _eval(games, refs, tmp_path / "out", capsys)
    assert rc == 2 and "no heldout games (0 held out, 1 train)" in err and "--split" in err
    assert main(["eval", "--film", "qiqi"]) == 2
    assert "--games, --out needed" in capsys.readouterr().err
