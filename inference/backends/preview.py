"""The preview backend: no model, no GPU, a real animated clip.

It renders the turn as a short MP4 in the same shape as the model's clips (17 frames, 720x480,
8 fps by default): a scene that scrolls at a speed set by the motion level, under a sky coloured
by the background and time of day; the characters as labelled discs moving through it; the
motion and background text; the character-state bars filling from their old to their new value.
Every frame carries a PREVIEW banner, and the result is flagged `is_preview`.

The state values come from game.preview_rules (documented word rules), so games played on the
preview behave plausibly. `render=False` skips the clip (benchmarks of the queue).

Like the model, it offers previews of the clip while it draws it (when the worker asks for them):
the frame just drawn, blurred less as the clip nears its end, as a picture forming.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Mapping
from functools import partial

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from contracts.turn import ProgressCallback, TurnRequest, TurnResult, previews_of
from game import preview_rules
from game import states as rules
from game.motion import motion_scope
from inference.mp4 import DEFAULT_MAX_BYTES, encode_mp4

LABEL = "PREVIEW"

_TIME_TINT = {  # (top, bottom) sky colours by time of day
    "night": ((10, 14, 48), (40, 52, 110)),
    "evening": ((60, 40, 100), (230, 130, 90)),
    "sunset": ((90, 50, 110), (250, 150, 70)),
    "morning": ((150, 200, 240), (250, 225, 190)),
}
_DAY = ((90, 160, 235), (200, 230, 250))
_CHAR_COLOURS = ((235, 80, 90), (60, 60, 70), (80, 150, 230), (240, 190, 60), (150, 90, 200))


def _forming(frame: np.ndarray, done: float) -> np.ndarray:
    """A preview of the clip so far: the latest frame, blurred less as the clip nears its end."""
    radius = (1.0 - done) * max(frame.shape[:2]) / 40
    return np.asarray(Image.fromarray(frame).filter(ImageFilter.GaussianBlur(radius)))


def _hue(text: str) -> tuple[int, int, int]:
    """A stable, pleasant colour for a background word (so 'forest' always looks the same)."""
    h = hashlib.blake2s(text.casefold().encode(), digest_size=3).digest()
    return (60 + h[0] % 150, 90 + h[1] % 130, 50 + h[2] % 120)


class PreviewBackend:
    name = "preview"
    is_preview = True

    def __init__(
        self,
        *,
        render: bool = True,
        frames: int = 17,
        width: int = 720,
        height: int = 480,
        fps: int = 8,
        delay: float = 0.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        scope_mapping: Mapping[int, float] | None = None,
        scope_otherwise: float | None = None,
    ):
        self.render = render
        self.frames, self.width, self.height, self.fps = frames, width, height, fps
        self.delay = delay  # seconds spread over the frames: stands in for model time in tests
        self.max_bytes = max_bytes
        self.scope_mapping, self.scope_otherwise = scope_mapping, scope_otherwise
        self._fonts: dict[int, ImageFont.ImageFont | ImageFont.FreeTypeFont] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        self._font(14)  # nothing to load but the font

    def _font(self, size: int):
        with self._lock:
            if size not in self._fonts:
                self._fonts[size] = ImageFont.load_default(size=size)
            return self._fonts[size]

    def generate(self, request: TurnRequest, progress: ProgressCallback) -> TurnResult:
        t0 = time.perf_counter()
        pred = preview_rules.predict(request.motion, request.adverb, len(request.characters), request.time_of_day)
        scope = motion_scope(pred.motion_level, self.scope_mapping, self.scope_otherwise)
        progress(0.05, "preview rules")
        timings = {"rules": time.perf_counter() - t0}

        frames = []
        previews = previews_of(progress) if self.render else None
        t1 = time.perf_counter()
        for i in range(self.frames):
            if self.delay:
                time.sleep(self.delay / self.frames)
            if self.render:
                frames.append(self._frame(request, pred, i))
            if previews is not None:
                previews.offer(i + 1, self.frames, partial(_forming, frames[-1], (i + 1) / self.frames))
            progress(0.05 + 0.8 * (i + 1) / self.frames, f"render {i + 1}/{self.frames}")
        timings["render"] = time.perf_counter() - t1

        mp4 = None
        if self.render:
            t2 = time.perf_counter()
            progress(0.9, "encode")
            mp4 = encode_mp4(np.stack(frames), fps=self.fps, max_bytes=self.max_bytes)
            timings["encode"] = time.perf_counter() - t2
        progress(1.0, "done")
        timings["generate"] = time.perf_counter() - t0
        return TurnResult(prediction=pred, motion_scope=scope, mp4=mp4, representation=None, is_preview=True,
                          timings=timings, clip_seconds=self.frames / self.fps)

    # --- drawing

    def _sky(self, request: TurnRequest) -> np.ndarray:
        top, bottom = _DAY
        for key, tint in _TIME_TINT.items():
            if key in request.time_of_day.casefold():
                top, bottom = tint
        ramp = np.linspace(0.0, 1.0, self.height, dtype=np.float32)[:, None, None]
        sky = np.asarray(top, np.float32) * (1 - ramp) + np.asarray(bottom, np.float32) * ramp
        return np.broadcast_to(sky, (self.height, self.width, 3)).astype(np.uint8)

    def _frame(self, request: TurnRequest, pred: rules.Prediction, i: int) -> np.ndarray:
        w, h = self.width, self.height
        u = max(1, min(w, h) // 48)  # layout unit, so small test frames stay legible
        t = i / max(1, self.frames - 1)
        speed = pred.motion_level  # scene scroll and character bounce grow with the motion level

        img = Image.fromarray(self._sky(request).copy())
        d = ImageDraw.Draw(img)

        # Rolling hills in the background's colour, scrolling with the motion.
        ground = _hue(request.background or "ground")
        shift = i * speed * w / 60
        pts = [(x, h * 0.62 + h * 0.06 * math.sin((x + shift) / (w / 5))) for x in range(0, w + 8, 8)]
        d.polygon(pts + [(w, h), (0, h)], fill=ground)
        darker = tuple(int(c * 0.7) for c in ground)
        for k in range(6):  # posts passing by make the motion easy to see
            x = (k * w / 5 - shift * 1.6) % (w + 40) - 20
            d.rectangle([x, h * 0.55, x + 2 * u, h * 0.72], fill=darker)

        # Characters: discs with their names, bouncing and drifting with the motion level.
        n = max(1, len(request.characters))
        r = 4 * u
        for k, name in enumerate(request.characters):
            cx = w * (k + 1) / (n + 1) + math.sin(2 * math.pi * t + k) * speed * u * 2
            cy = h * 0.52 - abs(math.sin(2 * math.pi * t * max(1, speed / 2) + k)) * speed * u * 1.5
            d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=_CHAR_COLOURS[k % len(_CHAR_COLOURS)], outline=(255, 255, 255), width=max(1, u // 3))
            d.text((cx, cy + r + u), name, font=self._font(3 * u), fill=(255, 255, 255), anchor="ma", stroke_width=1, stroke_fill=(0, 0, 0))

        # Text of the turn.
        small = self._font(max(8, int(2.6 * u)))
        motion = " ".join(p for p in (request.adverb, request.motion) if p)
        where = " ".join(p for p in (request.time_of_day, request.background) if p)
        d.text((u, 6 * u), f"Motion: {motion}", font=small, fill=(255, 255, 255), stroke_width=1, stroke_fill=(0, 0, 0))
        d.text((u, 9.5 * u), f"Background: {where}", font=small, fill=(255, 255, 255), stroke_width=1, stroke_fill=(0, 0, 0))
        d.text((w - u, 6 * u), f"motion level {pred.motion_level}", font=small, fill=(255, 255, 255), anchor="ra", stroke_width=1, stroke_fill=(0, 0, 0))

        # The preview label: always visible, never mistaken for model output.
        big = self._font(max(10, 4 * u))
        d.rectangle([0, 0, w, 5 * u], fill=(200, 30, 40))
        d.text((w / 2, 0.5 * u), f"{LABEL} - no model", font=big, fill=(255, 255, 255), anchor="ma")

        self._bars(d, request, pred, min(1.0, t * 1.5), u, small)
        return np.asarray(img)

    def _bars(self, d: ImageDraw.ImageDraw, request: TurnRequest, pred: rules.Prediction, k: float, u: int, font) -> None:
        """State bars of each character, filling from the old value to the new."""
        w, h = self.width, self.height
        names = list(request.characters)[:4]
        col_w = w / max(1, len(names))
        top = h * 0.78
        bar_h = max(2, int(1.6 * u))
        for j, name in enumerate(names):
            before = request.states_before.get(name, rules.CharacterState())
            after = rules.apply(before, pred)
            x0 = j * col_w + u
            d.text((x0, top - 3 * u), name, font=font, fill=(255, 255, 255), stroke_width=1, stroke_fill=(0, 0, 0))
            for row, stat in enumerate(rules.STATE_NAMES):
                a, b = getattr(before, stat), getattr(after, stat)
                v = a + (b - a) * k
                y = top + row * (bar_h + u)
                lx = x0 + 5 * u
                bw = max(2 * u, col_w - 18 * u)
                d.text((x0, y), stat[:3].upper(), font=font, fill=(255, 255, 255), stroke_width=1, stroke_fill=(0, 0, 0))
                d.rectangle([lx, y, lx + bw, y + bar_h], fill=(30, 30, 30))
                colour = (90, 200, 110) if b >= a else (230, 90, 80)
                d.rectangle([lx, y, lx + bw * v / rules.STATE_MAX, y + bar_h], fill=colour)
                d.text((lx + bw + u, y), f"{round(v)} ({b - a:+d})", font=font, fill=(255, 255, 255), stroke_width=1, stroke_fill=(0, 0, 0))
