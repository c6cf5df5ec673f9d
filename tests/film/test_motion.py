"""The motion measure on lavfi videos with known speeds, and the level scale."""

from __future__ import annotations

import pytest

from film.motion import LEVEL_FLOW, level_of, measure_video
from game.motion import motion_scope
from testkit.lavfi import Shot, make_video

# Source pixels per second at 24 fps -> pixels per frame at 8 fps: /8.
SPEEDS = [0, 4, 20, 80, 120, 320]


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict[float, float]:
    folder = tmp_path_factory.mktemp("motion")
    out = {}
    for speed in SPEEDS:
        path = folder / f"pan{speed}.mp4"
        make_video(path, [Shot("still", 2.2, 0, 3) if speed == 0 else Shot("pan", 2.2, speed, 3)], crf=12)
        out[speed] = measure_video(path)
    return out


def test_levels_follow_the_true_speeds(measured):
    levels = [level_of(measured[s]) for s in SPEEDS]
    assert levels == sorted(levels), (measured, levels)
    assert levels[0] == 1 and levels[1] == 1  # still and 0.5 px a frame: low
    assert levels[-1] == 5  # 40 px a frame: high
    assert levels[SPEEDS.index(80)] == 3 and levels[SPEEDS.index(120)] == 4


@pytest.mark.parametrize("speed", [20, 80, 120])
def test_pan_flow_is_its_speed_at_8_fps(measured, speed):
    """A 24 fps video is measured per frame and scaled to 8 fps: a pan of S px/s is S/8."""
    assert measured[speed] == pytest.approx(speed / 8, rel=0.15)


def test_still_background_is_masked(tmp_path):
    """A sprite moving over a still background: the flow is the sprite's, not its average with
    the background's zero (it covers a sixteenth of the frame)."""
    path = tmp_path / "sprite.mp4"
    make_video(path, [Shot("sprite", 2.2, 96, 1)], crf=12)
    assert measure_video(path) == pytest.approx(12.0, rel=0.2)


def test_level_scale_is_the_games_table_on_a_log_scale():
    assert {level: motion_scope(level) for level in range(1, 6)} == LEVEL_FLOW
    assert [level_of(f) for f in (0.0, 0.5, 1.1, 1.2, 2.5, 4.9, 5.1, 10, 12.2, 12.3, 15, 24.4, 24.6, 40, 500)] == \
        [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5]


@pytest.mark.parametrize("fps", [25, 30])
def test_other_frame_rates_resample_to_8_fps(tmp_path, fps):
    """A pan of 80 px/s at 25 or 30 fps, sampled at 8 fps by timestamps: 10 px a clip frame."""
    from film.frames import sample_spans, stream_origin
    from film.motion import measure_frames

    path = tmp_path / f"pan{fps}.mp4"
    make_video(path, [Shot("pan", 2.5, 80, 2)], fps=fps, crf=12)
    [(_i, frames)] = list(sample_spans(path, [(0.0, 17)], stream_origin(path), (720, 480)))
    assert measure_frames(frames) == pytest.approx(10.0, rel=0.1)
