"""An evaluation's folder: what was asked (`run.json`), and per turn its clip, its representation
and its record, each written whole (film.atomic) with the record last, so a turn whose record
exists is finished and a stopped run continues at the first turn without one.

    DIR/run.json                      the options; a run is continued only with the same ones
    DIR/clips/<game>/<turn>.mp4       the clip the backend made
    DIR/reps/<game>/<turn>.npy        its representation (the next turns' history)
    DIR/turns/<game>/<turn>.json      the prediction, seed, seconds and peak GPU memory
    DIR/metrics/<game>/<turn>.json    the turn's scores (with the metric models they came from)
    DIR/report.md, report.json, plots/, sheets/
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.errors import EvalInputError
from film.atomic import read_json, write_bytes, write_json

RUN_FILE = "run.json"
# Options that change what a turn is: a run is continued only with the same ones.
SAME = ("film", "games_sha256", "split", "backend", "memory_mode", "preset", "seed", "history_window",
        "decoder_steps")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def turn_name(index: int) -> str:
    return f"{index + 1:02d}"


def clip_path(out: Path, game: str, index: int) -> Path:
    return out / "clips" / game / f"{turn_name(index)}.mp4"


def rep_path(out: Path, game: str, index: int) -> Path:
    return out / "reps" / game / f"{turn_name(index)}.npy"


def record_path(out: Path, game: str, index: int) -> Path:
    return out / "turns" / game / f"{turn_name(index)}.json"


def metrics_path(out: Path, game: str, index: int) -> Path:
    return out / "metrics" / game / f"{turn_name(index)}.json"


def open_run(out: Path, config: dict[str, Any]) -> dict[str, Any]:
    """Start a run in `out`, or continue the one there when it was asked with the same options."""
    old = read_json(out / RUN_FILE)
    if old is not None:
        for key in SAME:
            if old.get(key) != config.get(key):
                what = "a games file that has changed since" if key == "games_sha256" else \
                    f"{key} {old.get(key)!r}, not {config.get(key)!r}"
                raise EvalInputError(f"{out} holds a run with {what}: run it again with its own options and games "
                                     "to continue it, or choose another --out")
        return old
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / RUN_FILE, config)
    return config


def save_array(path: Path, array: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, np.asarray(array, dtype=np.float32), allow_pickle=False)
    write_bytes(path, buf.getvalue())


def load_array(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)
