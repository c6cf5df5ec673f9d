"""Previews of a turn's clip while it is made: when one is due, and the small still it becomes.

A turn's stages offer pictures (the decoder after each denoising step, through diffusers' step
callback; the preview backend after each frame it draws); `TurnPreviews` takes one only when the
policy says it is due: at most one per `min_interval` seconds of the turn, at most `max_per_turn`,
spread over the turn's steps, never at the last step (the clip itself follows). The picture is
asked for in the caller's thread (on a GPU, a small kernel queued behind the step: no wait), and
turned into a WebP still in the previews' own thread, off the denoise's path; a still still being
made when the next is due makes that one skipped. Nothing here draws random numbers or touches
the latents: the clip is the same with previews on or off.

A preview that fails (to make here, or to be stored or shown later) is skipped, and the first
failure of a turn is logged.
"""

from __future__ import annotations

import concurrent.futures
import io
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)

MAX_SIDE = 360  # pixels of the still's longer side (a 480x720 clip's preview is 240x360)
MAX_BYTES = 48 * 1024  # a still is made smaller until it fits
FILE_NAME = "preview.webp"


@dataclass(frozen=True)
class PreviewPolicy:
    min_interval: float = 5.0  # seconds of the turn between two previews (and before the first)
    max_per_turn: int = 4

    def due(self, step: int, total: int, made: int, since_last: float) -> bool:
        """Whether a preview is due after `step` of `total`, `made` having been made, the last
        (or the turn's start) `since_last` seconds ago."""
        if made >= self.max_per_turn or step >= total or since_last < self.min_interval:
            return False
        return step * (self.max_per_turn + 1) >= (made + 1) * total  # spread over the steps


@dataclass(frozen=True)
class Still:
    data: bytes  # WebP
    step: int
    total: int
    number: int  # 1, 2, ... within the turn


def rgb_array(picture: Any) -> np.ndarray:
    """An RGB picture as uint8 (H, W, 3): from uint8 (H, W, 3), or from a float (3, H, W) tensor or
    array in [-1, 1] (the decoder's preview_rgb; a tensor on a GPU is copied here)."""
    if hasattr(picture, "detach"):
        picture = picture.detach().float().cpu().numpy()
    a = np.asarray(picture)
    if a.dtype == np.uint8:
        if a.ndim != 3 or a.shape[2] != 3:
            raise ValueError(f"a uint8 picture is (H, W, 3), got {a.shape}")
        return a
    if a.ndim != 3 or a.shape[0] != 3:
        raise ValueError(f"a float picture is (3, H, W), got {a.shape}")
    return (((np.clip(a, -1.0, 1.0) + 1.0) * 127.5).round().astype(np.uint8)).transpose(1, 2, 0)


def still(picture: Any, max_side: int = MAX_SIDE, max_bytes: int = MAX_BYTES) -> bytes:
    """A WebP of the picture, its longer side `max_side` (a latent-sized picture is scaled up,
    smoothly), at most `max_bytes`."""
    img = Image.fromarray(rgb_array(picture))
    scale = max_side / max(img.size)
    img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.Resampling.BILINEAR)
    for quality in (75, 60, 45, 30, 15):
        buf = io.BytesIO()
        img.save(buf, format="WEBP", quality=quality, method=4)
        if buf.tell() <= max_bytes:
            return buf.getvalue()
        img = img.resize((max(1, img.width * 3 // 4), max(1, img.height * 3 // 4)), Image.Resampling.BILINEAR)
    raise ValueError(f"a preview still does not fit in {max_bytes} bytes")


class TurnPreviews:
    """One turn's previews (a contracts.turn.PreviewSink): `deliver(Still)` is called in the
    previews' thread with each still made."""

    def __init__(self, turn_id: int, deliver: Callable[[Still], None], executor: concurrent.futures.Executor,
                 policy: PreviewPolicy = PreviewPolicy(), clock: Callable[[], float] = time.monotonic) -> None:
        self.turn_id = turn_id
        self.deliver = deliver
        self.executor = executor
        self.policy = policy
        self.clock = clock
        self.made = 0
        self.skipped = 0  # due while the last still was still being made
        self._last = clock()  # the turn's start: the first preview comes min_interval after it at the earliest
        self._busy = threading.Event()
        self._logged = False

    def failed(self, what: str) -> None:
        """A preview could not be made or sent: skipped; the turn's first failure is logged."""
        if not self._logged:
            self._logged = True
            log.warning("turn %d: a preview could not be %s; skipped (logged once per turn)", self.turn_id, what, exc_info=True)

    def offer(self, step: int, total: int, picture: Callable[[], Any]) -> None:
        now = self.clock()
        if not self.policy.due(step, total, self.made, now - self._last):
            return
        if self._busy.is_set():
            self.skipped += 1
            return
        try:
            pic = picture()
        except Exception:  # noqa: BLE001  (a preview never fails the turn)
            self.failed("made")
            return
        self.made += 1
        self._last = now
        self._busy.set()
        try:
            self.executor.submit(self._make, pic, step, total, self.made)
        except RuntimeError:  # the executor is shut down: the worker is stopping
            self._busy.clear()

    def _make(self, picture: Any, step: int, total: int, number: int) -> None:
        try:
            self.deliver(Still(still(picture), step, total, number))
        except Exception:  # noqa: BLE001
            self.failed("made")
        finally:
            self._busy.clear()

    def callback_on_step_end(self, pipe: Any, step_index: int, timestep: int, callback_kwargs: dict) -> dict:
        """diffusers' step callback for one clip (a decoder with `preview_rgb` and `num_timesteps`)."""
        x0 = callback_kwargs.get("x0", callback_kwargs.get("latents"))
        if x0 is not None:
            self.offer(step_index + 1, pipe.num_timesteps, lambda: pipe.preview_rgb(x0))
        return {}
