"""The film tests' videos and cast, made once per test session (fixtures imported by the tests)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from testkit.lavfi import Shot, make_video

# Hard cuts at 3, 6, 9, 11.5, 14.5, 17 s; what each shot should become.
FILM = [
    Shot("pan", 3.0, 80, 0),       # 10 px a clip frame: one clip, level 3
    Shot("sprite", 3.0, 160, 1),   # 20 px a clip frame on a still background: level 4
    Shot("still", 3.0, 0, 2),      # frozen
    Shot("black", 2.5),            # black
    Shot("pan", 3.0, 4, 3),        # 0.5 px a clip frame: level 1, and not frozen
    Shot("fadein", 2.5, 0, 4),     # faded
    Shot("pan", 4.5, 24, 5),       # 3 px a clip frame: two clips, level 2
    Shot("sprite", 1.5, 80, 6),    # too short
]
REASONS = {2: "frozen", 3: "black", 5: "faded", 7: "too short"}


@pytest.fixture(scope="session")
def film(tmp_path_factory) -> tuple[Path, list[float]]:
    path = tmp_path_factory.mktemp("film") / "film.mp4"
    return path, make_video(path, FILM)


@pytest.fixture(scope="session")
def cast_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cast")
    cv2.imwrite(str(folder / "qiqi.png"), np.full((64, 64, 3), (40, 40, 200), np.uint8))
    (folder / "cast.toml").write_text('[[characters]]\nid = "qiqi"\nname = "Qiqi"\nreference = "qiqi.png"\n', encoding="utf-8")
    return folder / "cast.toml"
