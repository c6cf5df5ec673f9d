"""Scene cuts and the shots between them, each kept or skipped with its reason.

One decode pass over the source at its own frame rate, on small frames (256 columns, the size
PySceneDetect itself downscales a frame to), feeding PySceneDetect's detector frame by frame
(ContentDetector: threshold 27, min_scene_len 15 frames; or AdaptiveDetector) and measuring two
things per frame for the skip rules: the mean luma, and whether the picture differs from the last
picture that differed (so slow changes add up and noise does not).

A shot is skipped, with its reason, when it is
- `too short`: fewer than 17 frames at 8 fps (2.125 s) between its cuts;
- `black`: at least 90 % of its frames are dark (mean luma < 20 of 255);
- `faded`: it fades from or to black and what is left after trimming the fade is too short
  (a longer shot keeps its middle: the fade-in ends at the first frame at 90 % of the shot's
  median luma, the fade-out starts after the last such frame);
- `frozen`: nothing in it changes: after its first frame, no frame differs from the last
  different picture (by more than 12 grey levels on more than 0.02 % of the small frame's
  pixels, so a talking mouth alone is a change).
  A held still teaches no motion; a slow pan still adds up to a change, compression noise not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
from scenedetect import AdaptiveDetector, ContentDetector, FrameTimecode, SceneDetector

from film.frames import CLIP_FRAMES, VideoError, decoded, probe, sample_count, stream_origin

DETECT_WIDTH = 256
THRESHOLD = 27.0
MIN_SCENE_LEN = 15  # frames of the source
DETECTORS = ("content", "adaptive")

DARK_LUMA = 20.0
BLACK_SHARE = 0.9
FADE_LEVEL = 0.9  # of the shot's median luma: where a fade-in ends
CHANGE_LEVEL = 12  # grey levels
CHANGE_SHARE = 0.0002  # of the pixels (7 of 256x144): a mouth that moves is a change


@dataclass(frozen=True)
class Shot:
    shot: int  # index in the source, from 0
    start_s: float  # the kept span (after any fade trim)
    end_s: float
    skip: str | None = None  # why the shot makes no clips

    @property
    def clips(self) -> int:
        return 0 if self.skip else sample_count(self.start_s, self.end_s) // CLIP_FRAMES


@dataclass(frozen=True)
class Cuts:
    source: str
    origin: float  # the first frame's presentation time (s): clip times count from it
    width: int  # display size
    height: int
    duration_s: float
    shots: tuple[Shot, ...]
    size: int = 0  # the source file's size in bytes when it was cut: another file, other cuts

    def to_json(self) -> dict:
        return {**asdict(self), "shots": [asdict(s) for s in self.shots]}

    @classmethod
    def from_json(cls, data: dict) -> Cuts:
        return cls(**{**data, "shots": tuple(Shot(**s) for s in data["shots"])})


def make_detector(name: str) -> SceneDetector:
    if name == "content":
        return ContentDetector(threshold=THRESHOLD, min_scene_len=MIN_SCENE_LEN)
    if name == "adaptive":
        return AdaptiveDetector(min_scene_len=MIN_SCENE_LEN)
    raise ValueError(f"unknown detector {name!r} (one of {', '.join(DETECTORS)})")


def find_cuts(path: Path, source: str, detector: str = "content",
              advance: Callable[[float], None] | None = None) -> Cuts:
    """The source's shots. `advance(seconds)` is called as the decode moves on (progress)."""
    info = probe(path)
    fps = info.fps if info.fps > 0 else Fraction(24)
    size = (DETECT_WIDTH, max(2, round(DETECT_WIDTH * info.height / info.width / 2) * 2))
    det = make_detector(detector)
    times: list[float] = []
    luma: list[float] = []
    changed: list[bool] = []
    cut_frames: list[int] = []
    ref: np.ndarray | None = None  # the last picture that differed from the one before it
    origin = stream_origin(path)
    shown = 0.0
    for i, (t, frame) in enumerate(decoded(path, 0.0, origin)):
        # swscale's fast bilinear: a third of the area filter's cost, and the cut pass converts every
        # source frame (PySceneDetect's own downscale is a plain linear resize, no finer).
        bgr = frame.to_ndarray(width=size[0], height=size[1], format="bgr24", interpolation="FAST_BILINEAR")
        cut_frames += [c.frame_num for c in det.process_frame(FrameTimecode(i, fps=fps), bgr)]
        grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        times.append(t)
        luma.append(float(grey.mean()))
        differs = ref is None or int(np.count_nonzero(cv2.absdiff(grey, ref) > CHANGE_LEVEL)) > CHANGE_SHARE * grey.size
        changed.append(differs)
        if differs:
            ref = grey
        if advance and t - shown >= 1.0:
            advance(t - shown)
            shown = t
    if not times:
        raise VideoError(f"{path}: no decodable frame")
    cut_frames += [c.frame_num for c in det.post_process(FrameTimecode(len(times) - 1, fps=fps))]
    step = float(1 / fps)
    end = times[-1] + step  # the last frame is shown for one frame time
    if advance:
        advance(max(0.0, end - shown))
    bounds = sorted({0, *(c for c in cut_frames if 0 < c < len(times)), len(times)})
    lum, chg = np.array(luma), np.array(changed)
    shots = []
    for n, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        start, stop = times[a], times[b] if b < len(times) else end
        shots.append(_judge(n, start, stop, np.array(times[a:b]), lum[a:b], chg[a:b], step))
    return Cuts(source, origin, info.width, info.height, end, tuple(shots), path.stat().st_size)


def _judge(n: int, start: float, end: float, times: np.ndarray, lum: np.ndarray, chg: np.ndarray,
           step: float) -> Shot:
    def enough(a: float, b: float) -> bool:
        return sample_count(a, b) >= CLIP_FRAMES

    if not enough(start, end):
        return Shot(n, start, end, "too short")
    dark = lum < DARK_LUMA
    if dark.mean() >= BLACK_SHARE:
        return Shot(n, start, end, "black")
    first, last = 0, len(lum)
    if dark[0] or dark[-1]:
        bright = np.flatnonzero(lum >= FADE_LEVEL * float(np.median(lum)))
        first, last = (int(bright[0]) if dark[0] else 0), (int(bright[-1]) + 1 if dark[-1] else len(lum))
        a = float(times[first]) if dark[0] else start
        b = float(times[last - 1]) + step if dark[-1] else end
        if not enough(a, b):
            return Shot(n, start, end, "faded")
        start, end = a, b
    if not chg[first + 1:last].any():  # chg[i]: frame i differs from the picture before it
        return Shot(n, start, end, "frozen")
    return Shot(n, start, end)
