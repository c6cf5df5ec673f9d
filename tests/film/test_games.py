"""Games from accepted clips: one character, consecutive, at most 5 turns, and a held-out split
that shares no shot with training."""

from __future__ import annotations

import json
from dataclasses import replace

from film.cast import Cast, Member, save_cast
from film.games import build_games, split_of, write_games
from film.manifest import Clip
from game.instruction import format_instruction


def _clip(shot: int, n: int, character: str = "qiqi", status: str = "accepted", key: str = "film") -> Clip:
    start = shot * 100 + n * 2.125
    return Clip(id=f"{key}-{shot:04d}-{n:02d}", source=f"{key}.mp4", shot=shot, start_s=start, end_s=start + 2.125,
                clip=f"clips/{key}-{shot:04d}-{n:02d}.mp4", stills=(), motion_flow=3.0, motion_level=2, status=status,
                character=character, motion="flies on a broom", adverb="quickly", background="sky", time="night",
                social=0, entertainment=1, stamina=-1)


def test_games_are_runs_of_one_characters_accepted_clips(tmp_path):
    clips = [_clip(0, n) for n in range(7)] + [_clip(1, 0, "jiji"), _clip(1, 1, "jiji"), _clip(1, 2, status="rejected"),
                                               _clip(1, 3), _clip(2, 0, status="needs_review")]
    games, summary = build_games(clips, {"qiqi": "Qiqi", "jiji": "Jiji"}, heldout=0.0)
    assert [[t["clip"] for t in g["turns"]] for g in games] == [
        [f"film-0000-0{n}" for n in range(5)], ["film-0000-05", "film-0000-06"],
        ["film-0001-00", "film-0001-01"], ["film-0001-03"]]
    assert summary.train == 4 and summary.heldout == 0 and summary.turns == 10
    turn = games[2]["turns"][0]
    assert turn["instruction"] == format_instruction(["Jiji"], "flies on a broom", "quickly", "sky", "night")
    assert (turn["motion_level"], turn["social"], turn["entertainment"], turn["stamina"]) == (2, 0, 1, -1)


def test_an_accepted_clip_without_its_fields_makes_no_game():
    games, summary = build_games([replace(_clip(0, 0), motion=None), _clip(0, 1)], {}, 0.0)
    assert summary.incomplete == ("film-0000-00",) and len(games) == 1


def test_heldout_split_shares_no_shot_with_training(tmp_path):
    save_cast(Cast((Member("qiqi", "Qiqi", _png(tmp_path)),)), tmp_path)
    clips = [_clip(shot, n, key=key) for key in ("a", "b") for shot in range(60) for n in range(3)]
    write_games(tmp_path, clips, heldout=0.25)
    games = [json.loads(line) for line in (tmp_path / "games.jsonl").read_text().splitlines()]
    shots = {split: {(g["source"], t["shot"]) for g in games if g["split"] == split for t in g["turns"]}
             for split in ("train", "heldout")}
    assert shots["train"] and shots["heldout"]
    assert not shots["train"] & shots["heldout"]
    assert 0.1 < len(shots["heldout"]) / 120 < 0.4
    assert all(split_of(src.removesuffix(".mp4"), shot, 0.25) == "heldout" for src, shot in shots["heldout"])
    assert all(1 <= len(g["turns"]) <= 5 for g in games)
    first = (tmp_path / "games.jsonl").read_bytes()
    write_games(tmp_path, list(reversed(clips)), heldout=0.25)
    assert (tmp_path / "games.jsonl").read_bytes() == first  # same clips, same games


def _png(folder):
    path = folder / "ref.png"
    path.write_bytes(bytes.fromhex("89504e470d0a1a0a"))
    return path
