"""Each kept shot cut into consecutive 17-frame clips (8 fps, 480x720) that never cross a cut,
written as an MP4 (H.264, yuv420p, CRF 16: visually lossless for training) and 4 evenly spaced
JPEG stills (what the captioner sees).

Clip ids: `<source key>-<shot:04d>-<clip:02d>`, shots and clips counted from 0 in time order, so
the same source and settings give the same ids.
"""

from __future__ import annotations

import re
from pathlib import Path

import av
import cv2
import numpy as np

from film.atomic import replacing, write_bytes
from film.cut import Shot
from film.frames import CLIP_FRAMES, FPS, HEIGHT, WIDTH, sample_count

CLIPS_DIR = "clips"
STILLS_DIR = "stills"
STILLS = 4
STILL_INDEXES = tuple(int(round(x)) for x in np.linspace(0, CLIP_FRAMES - 1, STILLS))  # 0, 5, 11, 16
CRF = 16
PRESET = "veryfast"
JPEG_QUALITY = 92


def source_key(path: Path) -> str:
    """A source's key in clip ids: its file name without the suffix, lowercased, other characters
    than letters, digits, '-' and '_' made '_' (at most 40 characters)."""
    key = re.sub(r"[^a-z0-9_-]+", "_", path.stem.casefold()).strip("_-")[:40]
    return key or "video"


def clip_id(key: str, shot: int, clip: int) -> str:
    return f"{key}-{shot:04d}-{clip:02d}"


def clip_starts(shot: Shot) -> list[float]:
    """The start time of each clip of a kept shot: back to back from the shot's first frame."""
    n = 0 if shot.skip else sample_count(shot.start_s, shot.end_s) // CLIP_FRAMES
    return [shot.start_s + k * CLIP_FRAMES / FPS for k in range(n)]


def encode_mp4(path: Path, frames: np.ndarray) -> None:
    """(T, 480, 720, 3) RGB frames as an 8 fps H.264 MP4, written atomically."""
    with replacing(path) as tmp, av.open(str(tmp), "w", format="mp4", options={"movflags": "+faststart"}) as out:
        stream = out.add_stream("libx264", rate=FPS, options={"crf": str(CRF), "preset": PRESET})
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.thread_count = 2  # fixed, so the bytes do not depend on the machine's cores
        for rgb in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        out.mux(stream.encode(None))


def write_clip(folder: Path, cid: str, frames: np.ndarray) -> tuple[str, tuple[str, ...]]:
    """The clip's MP4 and stills under `folder`; returns their paths relative to it."""
    clip = f"{CLIPS_DIR}/{cid}.mp4"
    encode_mp4(folder / clip, frames)
    stills = []
    for k, i in enumerate(STILL_INDEXES):
        name = f"{STILLS_DIR}/{cid}-{k}.jpg"
        ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(frames[i], cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise OSError(f"cannot encode {name}")
        write_bytes(folder / name, jpeg.tobytes())
        stills.append(name)
    return clip, tuple(stills)
