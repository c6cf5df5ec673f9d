"""Frames from a video file, decoded with PyAV: the clip's 8 fps, 480x720 frames, and small
frames for scene detection.

Sampling by timestamps: the frame shown at time t is the last decoded frame whose presentation
time is <= t, so any source frame rate (23.976, 25, 30, variable) gives the same 8 fps clock.
Times are seconds from the source's first frame.

Resize and crop (any size and aspect): the frame is scaled, keeping its display aspect (the
stream's sample aspect ratio applied, so anamorphic DVD frames come out right), by the smallest
factor that makes it cover 720x480 (both sides at least that size), then the centre 720x480 is
kept. A 16:9 frame loses a strip at its left and right, a 4:3 frame at its top and bottom; nothing
is stretched or letterboxed.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from av.container import InputContainer
from av.error import FFmpegError

FPS = 8
HEIGHT, WIDTH = 480, 720
CLIP_FRAMES = 17  # the decoder's clip: 17 frames at 8 fps (5 latent frames)
CLIP_SECONDS = CLIP_FRAMES / FPS
EPS = 1e-6  # seconds: timestamps equal to a sample time count as at it


class VideoError(Exception):
    """A video that cannot be read; the message names the file and says what is wrong."""


@dataclass(frozen=True)
class VideoInfo:
    duration_s: float
    fps: Fraction  # the stream's average rate
    width: int  # display size (sample aspect applied)
    height: int


def _open(path: Path) -> InputContainer:
    if not path.exists():
        raise VideoError(f"{path}: no such file")
    if not path.is_file():
        raise VideoError(f"{path}: not a file")
    try:
        container = av.open(str(path))
    except FFmpegError as e:
        raise VideoError(f"{path}: not a video, or a damaged or truncated one ({e})") from None
    if not container.streams.video:
        container.close()
        raise VideoError(f"{path}: has no video stream")
    return container


def _display_size(stream: av.VideoStream) -> tuple[int, int]:
    w, h = stream.codec_context.width, stream.codec_context.height
    sar = stream.sample_aspect_ratio
    if sar and sar > 0 and sar != 1:
        w = round(w * sar)
    return w, h


def probe(path: Path) -> VideoInfo:
    with _open(path) as container:
        stream = container.streams.video[0]
        w, h = _display_size(stream)
        if stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        elif container.duration is not None:
            duration = container.duration / av.time_base
        else:
            duration = 0.0
        fps = stream.average_rate or stream.guessed_rate or Fraction(0)
        return VideoInfo(duration, Fraction(fps), w, h)


def cover_size(width: int, height: int) -> tuple[int, int]:
    """The size a (width, height) frame is scaled to before the centre crop: the smallest that
    covers WIDTH x HEIGHT with the aspect kept (rounded up, so never a pixel short)."""
    scale = max(WIDTH / width, HEIGHT / height)
    return max(WIDTH, math.ceil(width * scale - 1e-9)), max(HEIGHT, math.ceil(height * scale - 1e-9))


def to_clip_frame(frame: av.VideoFrame, size: tuple[int, int]) -> np.ndarray:
    """One decoded frame as the clip's RGB 480x720 frame (scale to cover, centre crop)."""
    w, h = size
    # swscale's bicubic widens its kernel when shrinking (no aliasing); faster than its area filter.
    rgb = frame.to_ndarray(width=w, height=h, format="rgb24", interpolation="BICUBIC")
    y0, x0 = (h - HEIGHT) // 2, (w - WIDTH) // 2
    return np.ascontiguousarray(rgb[y0:y0 + HEIGHT, x0:x0 + WIDTH])


def decoded(path: Path, start_s: float = 0.0, origin: float | None = None) -> Iterator[tuple[float, av.VideoFrame]]:
    """(seconds from the source's first frame, frame) in presentation order, from about `start_s`
    (a seek to the keyframe before it; earlier frames may come first). `origin` is the first
    frame's presentation time when known (a seek skips it). A damaged stream raises VideoError."""
    seek = start_s > 1.0 and origin is not None
    frames = _decoded(path, start_s if seek else 0.0, origin)
    try:
        for t, frame in frames:
            if seek and t > start_s + EPS:
                break  # the seek landed after start_s (an imprecise index): decode from the start instead
            seek = False
            yield t, frame
        else:
            return
    finally:
        frames.close()
    yield from _decoded(path, 0.0, origin)


def _decoded(path: Path, start_s: float, origin: float | None) -> Generator[tuple[float, av.VideoFrame], None, None]:
    with _open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        tb = stream.time_base or Fraction(1, 1000)
        if origin is None:
            origin = float(stream.start_time * tb) if stream.start_time is not None else None
        if start_s > 0.0 and origin is not None:
            container.seek(int((start_s + origin - 0.5) / tb), stream=stream, backward=True)
        last = -math.inf
        try:
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                t = float(frame.pts * tb)
                if origin is None:
                    origin = t
                t -= origin
                if t <= last:  # a repeated or out-of-order timestamp: keep the first
                    continue
                last = t
                yield t, frame
        except FFmpegError as e:
            raise VideoError(f"{path}: damaged or truncated near {max(last, 0):.2f} s ({e})") from None


def stream_origin(path: Path) -> float:
    """The first frame's presentation time (s): what `decoded` times are counted from."""
    with _open(path) as container:
        stream = container.streams.video[0]
        tb = stream.time_base or Fraction(1, 1000)
        if stream.start_time is not None:
            return float(stream.start_time * tb)
        for frame in container.decode(stream):
            if frame.pts is not None:
                return float(frame.pts * tb)
    raise VideoError(f"{path}: no decodable frame")


def sample_count(start_s: float, end_s: float) -> int:
    """How many 8 fps sample times start + k/8 fall in [start_s, end_s)."""
    return max(0, math.ceil((end_s - start_s) * FPS - EPS))


def sample_spans(path: Path, spans: Sequence[tuple[float, int]], origin: float,
                 display: tuple[int, int]) -> Iterator[tuple[int, np.ndarray]]:
    """For each span (start_s, n) in time order, its n frames at start + k/8 as (n, 480, 720, 3)
    RGB, yielded as (span index, frames) in order. Spans less than GAP_S apart share one decode
    pass; a longer gap is a seek. A frame before a span's start is never used (no clip crosses a
    cut)."""
    size = cover_size(*display)
    run: list[int] = []
    for i, (start, _n) in enumerate(spans):
        if run and start - spans[run[-1]][0] > GAP_S:
            yield from _sample_run(path, spans, run, origin, size)
            run = []
        run.append(i)
    if run:
        yield from _sample_run(path, spans, run, origin, size)


GAP_S = 30.0


def _sample_run(path: Path, spans: Sequence[tuple[float, int]], run: list[int], origin: float,
                size: tuple[int, int]) -> Iterator[tuple[int, np.ndarray]]:
    pending = iter(run)
    cur: int | None = next(pending)
    out: list[np.ndarray] = []
    prev: tuple[float, av.VideoFrame] | None = None

    def times(i: int) -> list[float]:
        return [spans[i][0] + k / FPS for k in range(spans[i][1])]

    want = times(cur)
    for t, frame in decoded(path, spans[cur][0], origin):
        while cur is not None and t > want[len(out)] + EPS:
            # `frame` comes after the sample time: the frame shown then is `prev` (or, when the
            # span's first frame is a rounding later than its start, this one).
            out.append(to_clip_frame(prev[1] if prev is not None else frame, size))
            if len(out) == len(want):
                yield cur, np.stack(out)
                cur, out = next(pending, None), []
                if cur is not None:
                    want = times(cur)
                    if prev is not None and prev[0] < spans[cur][0] - EPS:
                        prev = None  # before the next span's start: another shot's frame
        if cur is None:
            return
        if t >= spans[cur][0] - EPS:
            prev = (t, frame)
    # The video ended: its last frame stays on screen for the remaining sample times.
    while cur is not None and prev is not None:
        out.extend(to_clip_frame(prev[1], size) for _ in range(len(want) - len(out)))
        yield cur, np.stack(out)
        cur, out = next(pending, None), []
        if cur is not None:
            want = times(cur)
    if cur is not None:
        raise VideoError(f"{path}: ended before {spans[cur][0]:.2f} s (truncated?)")
