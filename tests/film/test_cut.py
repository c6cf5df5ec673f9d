"""Scene cuts on a lavfi film with hard cuts at known times, and the skip reasons."""

from __future__ import annotations

import numpy as np
import pytest

from film.cut import find_cuts
from film.frames import CLIP_SECONDS, HEIGHT, WIDTH, VideoError, cover_size, decoded, sample_spans, stream_origin
from testkit.lavfi import Shot, make_video
from tests.film.films import FILM, REASONS, film  # noqa: F401  (fixture)

FRAME = 1 / 24


@pytest.mark.parametrize("detector", ["content", "adaptive"])
def test_cuts_are_found_within_two_frames(film, detector):  # noqa: F811  (fixture)
    path, true_cuts = film
    found = find_cuts(path, str(path), detector)
    starts = [s.start_s for s in found.shots]
    # A fade's start is where its shot is trimmed to (no longer the cut); the cut before it is
    # checked through the previous shot's end.
    bounds = sorted({*starts[1:], *(s.end_s for s in found.shots[:-1])})
    for t in true_cuts:
        assert min(abs(b - t) for b in bounds) <= 2 * FRAME + 1e-6, (t, bounds)
    assert len(found.shots) == len(FILM)
    assert found.duration_s == pytest.approx(sum(s.seconds for s in FILM), abs=FRAME)


def test_shots_are_skipped_with_their_reason(film):  # noqa: F811
    path, _cuts = film
    shots = find_cuts(path, str(path)).shots
    assert {s.shot: s.skip for s in shots if s.skip} == REASONS
    assert [s.clips for s in shots if not s.skip] == [1, 1, 1, 2]


def test_fades_are_trimmed_from_a_long_shot(tmp_path):
    """A 5 s still texture fading in over its first second and out over its last: one shot, kept
    from about where the fade-in reaches 90 % of the shot's brightness to where the fade-out
    leaves it (still frames: skipped as frozen, but after the trim)."""
    path = tmp_path / "fade.mp4"
    make_video(path, [Shot("pan", 3.0, 40, 2), Shot("fadein", 5.0, 0, 1, fade=1.0)])
    shot = find_cuts(path, str(path)).shots[-1]
    assert shot.start_s == pytest.approx(3.9, abs=0.1)
    assert shot.end_s == pytest.approx(8.0, abs=FRAME)


def test_a_small_movement_is_not_frozen(tmp_path):
    """A still picture where only a 16-pixel square moves (a mouth, a blink) is a shot to keep;
    the same picture without it is frozen."""
    path = tmp_path / "small.mp4"
    make_video(path, [Shot("sprite", 3.0, 6, 1, side=16), Shot("still", 3.0, 0, 2)])
    assert [s.skip for s in find_cuts(path, str(path)).shots] == [None, "frozen"]


def test_no_sample_crosses_a_cut(film):  # noqa: F811
    """Every clip's 17 frames come from its own shot: the frames of a clip ending at a cut match
    the shot's texture, not the next one's (each shot has its own colour)."""
    path, true_cuts = film
    found = find_cuts(path, str(path))
    spans = []
    for s in found.shots:
        if not s.skip:
            spans += [(s.start_s + k * CLIP_SECONDS, 17) for k in range(s.clips)]
    for (start, n), (i, frames) in zip(spans, sample_spans(path, spans, found.origin, (found.width, found.height)), strict=True):
        assert frames.shape == (n, HEIGHT, WIDTH, 3)
        end = start + CLIP_SECONDS
        assert not any(start < t < end - 1e-6 for t in true_cuts), (start, end)
        hue = frames.reshape(n, -1, 3).mean(axis=1)
        assert np.abs(hue - hue[0]).max() < 25, f"clip {i} at {start:.3f} s changes colour: {hue.round()}"


def test_cover_and_centre_crop_any_aspect(tmp_path):
    assert cover_size(1920, 1080) == (854, 480)
    assert cover_size(640, 480) == (720, 540)
    assert cover_size(720, 480) == (720, 480)
    assert cover_size(360, 240) == (720, 480)
    path = tmp_path / "wide.mp4"
    make_video(path, [Shot("pan", 2.5, 40, 1)], size=(640, 360))
    origin = stream_origin(path)
    [(_i, frames)] = list(sample_spans(path, [(0.0, 17)], origin, (640, 360)))
    assert frames.shape == (17, 480, 720, 3)


def test_unreadable_files_say_so(tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n")
    with pytest.raises(VideoError, match="notes.mp4: not a video"):
        list(decoded(text))
    with pytest.raises(VideoError, match="no such file"):
        list(decoded(tmp_path / "missing.mp4"))
