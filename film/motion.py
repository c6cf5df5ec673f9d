"""The motion measure: how much a clip moves, in pixels per frame at 480x720 and 8 fps, and the
decoder's motion level (1-5) it is nearest to. Written once: the film pipeline measures prepared
clips with it, and checking a generated clip against the level it was asked for uses the same.

The measure (the paper's recipe, with OpenCV's DIS flow where the paper used MemFlow):
1. each frame as grey at 480x720 (another size is scaled to cover it and centre-cropped, as the
   pipeline prepares clips);
2. dense optical flow between each pair of consecutive frames (DIS, the `fast` preset: no weights
   to download), its absolute magnitude per pixel;
3. the background masked: a pixel counts when its magnitude is at least 0.2 of the largest
   magnitude of that frame pair (so a still background behind a moving character is left out,
   and a pan, where everything moves alike, keeps the whole frame);
4. the mean over the kept pixels, averaged over the pairs: `motion_flow`.

A video at another frame rate has its per-frame flow scaled to 8 fps (x fps/8).

The level: the one whose flow value (game.motion's table: 0.5, 2.5, 10, 15, 40) is nearest on a
log scale, i.e. the boundaries are the geometric means of neighbours (1.12, 5, 12.2, 24.5).
Perceived speed and flow errors are both relative (1 px/frame of jitter matters next to 0.5, not
next to 40), and the table's own steps are ratios (x5, x4, x1.5, x2.7); on a linear scale a
4 px/frame movement would round to level 1 with everything under 1.5 px.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np

from film.frames import FPS, HEIGHT, WIDTH, cover_size, decoded, probe, to_clip_frame
from game.motion import DEFAULT_MOTION_SCOPE, DEFAULT_OTHERWISE

MASK_SHARE = 0.2  # of the frame pair's largest flow magnitude
LEVEL_FLOW: dict[int, float] = {level: float(DEFAULT_MOTION_SCOPE.get(level, DEFAULT_OTHERWISE)) for level in range(1, 6)}


def _grey(frame: np.ndarray) -> np.ndarray:
    if frame.ndim == 3:
        frame = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    if frame.shape != (HEIGHT, WIDTH):
        w, h = cover_size(frame.shape[1], frame.shape[0])
        frame = cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA if w <= frame.shape[1] else cv2.INTER_CUBIC)
        y0, x0 = (h - HEIGHT) // 2, (w - WIDTH) // 2
        frame = frame[y0:y0 + HEIGHT, x0:x0 + WIDTH]
    return np.ascontiguousarray(frame)


def pair_flow(flow: np.ndarray) -> float:
    """One frame pair's masked mean magnitude, from its (H, W, 2) flow field."""
    mag = np.hypot(flow[..., 0], flow[..., 1])
    peak = float(mag.max())
    if peak <= 0.0 or not math.isfinite(peak):
        return 0.0
    return float(mag[mag >= MASK_SHARE * peak].mean())


def measure_frames(frames: np.ndarray, fps: float = FPS) -> float:
    """`motion_flow` of (T, H, W, 3) RGB or (T, H, W) grey uint8 frames at `fps`."""
    if len(frames) < 2:
        raise ValueError(f"motion needs at least 2 frames, got {len(frames)}")
    dis = cv2.DISOpticalFlow.create(cv2.DISOPTICAL_FLOW_PRESET_FAST)
    greys = [_grey(f) for f in frames]
    # DIS writes into the array it is given (read as a first guess only when asked to).
    values = [pair_flow(dis.calc(a, b, np.zeros((*a.shape, 2), np.float32))) for a, b in zip(greys, greys[1:], strict=False)]
    return float(np.mean(values)) * fps / FPS


def measure_video(path: Path) -> float:
    """`motion_flow` of a video file (decoded with PyAV, every frame, at the file's frame rate)."""
    info = probe(path)
    size = cover_size(info.width, info.height)
    frames = np.stack([to_clip_frame(frame, size) for _t, frame in decoded(path)])
    fps = float(info.fps) if info.fps > 0 else FPS
    return measure_frames(frames, fps)


def level_of(flow: float) -> int:
    """The motion level whose flow value is nearest to `flow` on a log scale (ties: the lower)."""
    if not flow > 0.0:
        return 1
    return min(LEVEL_FLOW, key=lambda level: (abs(math.log(flow / LEVEL_FLOW[level])), level))
