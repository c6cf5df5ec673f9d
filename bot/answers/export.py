"""/export: a session's shots stitched into one MP4 that fits the upload limit.

The clips go from the database to a temporary folder one at a time and the result is uploaded from
its file, so the bot never holds more than one clip in memory. ffmpeg (through ffmpeg-python) is
the binary the worker encodes with: the system's, or the static one of the imageio-ffmpeg wheel;
no ffprobe is needed, because each turn stores its clip's length.

The clips share their encoding (one backend, one encoder), so they are first joined without
re-encoding; only if that fails or is too large is the video re-encoded, at a bitrate computed
from the limit and the stored lengths and, if needed, at a smaller size.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import ffmpeg

from game.errors import ExportCooldown, ExportTooLarge, GameError, NothingToExport
from i18n import L_
from service import exports
from service.deps import Deps

# Clips stored before turns recorded their length: the released decoder's 17 frames at 8 fps.
FALLBACK_CLIP_SECONDS = 17 / 8


class ExportBusy(GameError):
    """The member's previous /export is still being made (a refusal of the bot's own command)."""

    code = "export_busy"

    def __init__(self) -> None:
        super().__init__(L_("Your previous /export is still being stitched. Wait for it to arrive, then try again."))


class ExportFailed(RuntimeError):
    """ffmpeg could not join the clips (the message ends with ffmpeg's own words)."""


@dataclass(frozen=True)
class Export:
    path: Path  # the stitched MP4, inside the caller's folder
    shots: int
    first_seq: int
    last_seq: int


async def _ffmpeg(stream) -> None:
    """Run an ffmpeg-python stream with the worker's ffmpeg binary, off the event loop."""
    # -xerror: without it the concat demuxer stops at a clip it cannot open and still exits 0,
    # which would deliver a video cut short without a word.
    args = stream.global_args("-hide_banner", "-loglevel", "error", "-xerror", "-y")
    try:
        await asyncio.to_thread(args.run, cmd=exports.encoder(), capture_stdout=True, capture_stderr=True)
    except ffmpeg.Error as e:
        raise ExportFailed(f"ffmpeg failed: {e.stderr.decode(errors='replace')[-800:].strip()}") from e


async def stitch(listing: Path, seconds: float, limit: int, out_dir: Path) -> Path:
    """Join the clips of an ffconcat `listing` (in order, `seconds` long in all) into one MP4 of at
    most `limit` bytes; ExportTooLarge if even the smaller re-encode does not fit."""

    def concat():
        return ffmpeg.input(str(listing), f="concat", safe=0)

    joined = out_dir / "joined.mp4"
    try:
        await _ffmpeg(concat().output(str(joined), c="copy", movflags="+faststart"))
    except ExportFailed:  # clips of different encodings: re-encode them together
        await _ffmpeg(concat().output(str(joined), vcodec="libx264", pix_fmt="yuv420p", crf=23, movflags="+faststart"))
    if joined.stat().st_size <= limit:
        return joined
    kbps = max(50, int(limit * 8 * 0.85 / max(seconds, 1.0) / 1000))
    for scale in (1.0, 0.5):
        small = out_dir / f"small-{scale}.mp4"
        vf = f"scale=trunc(iw*{scale}/2)*2:trunc(ih*{scale}/2)*2,format=yuv420p"
        await _ffmpeg(concat().output(str(small), vf=vf, vcodec="libx264", video_bitrate=f"{kbps}k",
                                      maxrate=f"{kbps}k", bufsize=f"{kbps * 2}k", movflags="+faststart"))
        if small.stat().st_size <= limit:
            return small
    raise ExportTooLarge(limit)


async def export_session(deps: Deps, session_id: int, *, count: int, limit: int, out_dir: Path) -> Export:
    """The latest `count` shots of a session stitched under `limit` bytes, in `out_dir`; each clip
    is read on its own and written straight to disk."""
    lines, written, seconds = [], [], 0.0
    for shot in await exports.shots(deps, session_id, count):
        data = await exports.clip(deps, shot.turn_id)
        if data is None:  # pruned since it was listed
            continue
        path = out_dir / f"{shot.seq:06d}.mp4"
        await asyncio.to_thread(path.write_bytes, data)
        del data
        lines.append(f"file '{path.name}'")
        written.append(shot)
        seconds += shot.clip_seconds or FALLBACK_CLIP_SECONDS
    if not written:
        raise NothingToExport()
    listing = out_dir / "clips.ffconcat"
    listing.write_text("ffconcat version 1.0\n" + "\n".join(lines) + "\n")
    video = await stitch(listing, seconds, limit, out_dir)
    return Export(video, len(written), written[0].seq, written[-1].seq)


class ExportLimiter:
    """Per-member rate limit of /export: one stitch at a time per member, a pause of
    `cooldown` seconds after each delivered video, and at most `parallel` stitches bot-wide
    (the rest wait their turn; each is a CPU-bound ffmpeg run)."""

    def __init__(self, cooldown: float, parallel: int = 2, clock: Callable[[], float] = time.monotonic):
        self.cooldown = cooldown
        self.clock = clock
        self._running: set[int] = set()
        self._last: dict[int, float] = {}
        self._slots = asyncio.Semaphore(parallel)

    @contextlib.asynccontextmanager
    async def hold(self, user_id: int) -> AsyncIterator[None]:
        """Raise the refusal if `user_id` may not export now; else run the body in a slot. Only a
        body that completes starts the cooldown: a refused or failed export costs nothing."""
        if user_id in self._running:
            raise ExportBusy()
        left = self._last.get(user_id, float("-inf")) + self.cooldown - self.clock()
        if left > 0:
            raise ExportCooldown(left)
        self._running.add(user_id)
        try:
            async with self._slots:
                yield
            self._last[user_id] = self.clock()
            self._forget_expired()
        finally:
            self._running.discard(user_id)

    def _forget_expired(self) -> None:
        now = self.clock()
        for uid in [u for u, t in self._last.items() if now - t >= self.cooldown]:
            del self._last[uid]
