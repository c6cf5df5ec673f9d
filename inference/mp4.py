"""Frames to MP4: H.264, yuv420p, +faststart, under a size cap.

Uses the ffmpeg binary on PATH, or the static one that the imageio-ffmpeg wheel ships.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile

import ffmpeg
import numpy as np

DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # under Discord's smallest upload limit


class FFmpegMissing(RuntimeError):
    pass


@functools.cache
def ffmpeg_binary() -> str:
    """Path of a usable ffmpeg; a clear error if there is none."""
    explicit = os.environ.get("ANIMEGAMER_FFMPEG")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise FFmpegMissing(f"ANIMEGAMER_FFMPEG={explicit!r} is not an executable file")
        return explicit
    found = shutil.which("ffmpeg")
    if found:
        return found
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as e:  # the wheel may lack a binary for this platform
        raise FFmpegMissing(
            "no ffmpeg found: install ffmpeg (apt-get install ffmpeg) or the imageio-ffmpeg "
            f"wheel, or set ANIMEGAMER_FFMPEG ({e})"
        ) from e


def encode_mp4(
    frames: np.ndarray,
    fps: int = 8,
    crf: int = 20,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> bytes:
    """Encode uint8 frames (T, H, W, 3) as an MP4 that stays under `max_bytes`.

    If the first encode is too large, the quality is lowered (higher CRF) until it fits.
    """
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"frames must be (T, H, W, 3), got {frames.shape}")
    if frames.dtype != np.uint8:
        raise ValueError(f"frames must be uint8, got {frames.dtype}")
    t, h, w, _ = frames.shape
    if h % 2 or w % 2:  # yuv420p needs even sizes
        frames = frames[:, : h - h % 2, : w - w % 2]
        h, w = frames.shape[1:3]
    raw = np.ascontiguousarray(frames).tobytes()
    for attempt_crf in (crf, crf + 6, crf + 12, crf + 18, 51):
        out = _run(raw, w, h, fps, attempt_crf)
        if len(out) <= max_bytes:
            return out
    raise ValueError(f"cannot encode {t} frames of {w}x{h} under {max_bytes} bytes")


def _run(raw: bytes, w: int, h: int, fps: int, crf: int) -> bytes:
    # +faststart moves the index to the front, which needs a seekable output: a temp file.
    with tempfile.TemporaryDirectory(prefix="animegamer-mp4-") as tmp:
        path = os.path.join(tmp, "clip.mp4")
        stream = (
            ffmpeg.input("pipe:", format="rawvideo", pix_fmt="rgb24", s=f"{w}x{h}", framerate=fps)
            .output(
                path,
                vcodec="libx264",
                pix_fmt="yuv420p",
                crf=crf,
                preset="veryfast",
                movflags="+faststart",
                r=fps,
            )
            .global_args("-hide_banner", "-loglevel", "error", "-y")
        )
        try:
            stream.run(cmd=ffmpeg_binary(), input=raw, capture_stdout=True, capture_stderr=True)
        except ffmpeg.Error as e:
            msg = e.stderr.decode(errors="replace").strip()
            raise RuntimeError(f"ffmpeg failed: {msg}") from e
        with open(path, "rb") as f:
            return f.read()
