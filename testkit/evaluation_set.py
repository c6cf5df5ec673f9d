"""Games files and reference images for the evaluation tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

# Three short games of the released film's cast (qiqi), as film/games.py writes them.
GAMES = [
    {"id": "g1", "split": "heldout", "character": "qiqi", "turns": [
        {"instruction": "Character: Qiqi; Motion: quickly fly on broomstick; Background: night sky.",
         "motion_level": 4, "social": 0, "entertainment": 1, "stamina": -1},
        {"instruction": "Character: Qiqi; Motion: slowly walk; Background: day town.",
         "motion_level": 2, "social": 1, "entertainment": 0, "stamina": 1},
    ]},
    {"id": "g2", "split": "heldout", "character": "jiji", "turns": [
        {"instruction": "Character: Jiji; Motion: sit on railing; Background: evening street.",
         "motion_level": 1, "social": 0, "entertainment": 0, "stamina": 1},
        {"instruction": "Character: Jiji; Motion: run; Background: grass.",
         "motion_level": 3, "social": 0, "entertainment": 1, "stamina": -1},
    ]},
    {"id": "g3", "split": "train", "character": "qiqi", "turns": [
        {"instruction": "Character: Qiqi; Motion: eat; Background: bakery.",
         "motion_level": 2, "social": 0, "entertainment": 1, "stamina": 1},
    ]},
]


def write_games(path: Path, games: list[dict] = GAMES) -> Path:
    path.write_text("".join(json.dumps(g) + "\n" for g in games), encoding="utf-8")
    return path


def write_references(folder: Path, ids=("qiqi", "jiji")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for cid in ids:
        Image.fromarray((rng.random((96, 64, 3)) * 255).astype(np.uint8)).save(folder / f"{cid}.png")
    return folder
