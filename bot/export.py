"""/export: a session's shots stitched into one MP4 that fits the upload limit.

The clips share their encoding (one backend, one encoder), so they are first joined without
re-encoding; only if that fails or is too large is the video re-encoded, at a bitrate computed
from the limit and, if needed, at a smaller size.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path

from game.errors import ExportTooLarge
from inference.mp4 import ffmpeg_binary


class ExportFailed(RuntimeError):
    pass


async def _run(*args: str) -> None:
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise ExportFailed(err.decode(errors="replace")[-800:])


async def _duration(path: Path) -> float:
    ffprobe = os.path.join(os.path.dirname(ffmpeg_binary()), "ffprobe")
    if not os.path.exists(ffprobe):
        ffprobe = "ffprobe"
    proc = await asyncio.create_subprocess_exec(
        ffprobe, "-v", "error", "-show_entries", "format=duration", "-of", "json", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await proc.communicate()
    try:
        return float(json.loads(out)["format"]["duration"])
    except (ValueError, KeyError):
        return 0.0


async def stitch(clips: list[bytes], limit: int) -> bytes:
    """Join MP4 clips in order into one MP4 of at most `limit` bytes (ExportTooLarge otherwise)."""
    ff = ffmpeg_binary()
    with tempfile.TemporaryDirectory(prefix="ag-export-") as tmp:
        d = Path(tmp)
        listing = d / "clips.txt"
        names = []
        for i, clip in enumerate(clips):
            p = d / f"{i:05d}.mp4"
            p.write_bytes(clip)
            names.append(f"file '{p.name}'")
        listing.write_text("\n".join(names) + "\n")
        out = d / "joined.mp4"
        concat = (ff, "-y", "-v", "error", "-f", "concat", "-safe", "0", "-i", str(listing))
        try:
            await _run(*concat, "-c", "copy", "-movflags", "+faststart", str(out))
        except ExportFailed:  # clips of different encodings: re-encode them together
            await _run(*concat, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "23", "-movflags", "+faststart", str(out))
        if out.stat().st_size <= limit:
            return out.read_bytes()
        seconds = await _duration(out) or max(1.0, len(clips) * 2.125)
        for scale in (1.0, 0.5):
            kbps = max(50, int(limit * 8 * 0.85 / seconds / 1000))
            small = d / f"small-{scale}.mp4"
            vf = f"scale=trunc(iw*{scale}/2)*2:trunc(ih*{scale}/2)*2,format=yuv420p"
            await _run(*concat, "-vf", vf, "-c:v", "libx264", "-b:v", f"{kbps}k", "-maxrate", f"{kbps}k",
                       "-bufsize", f"{kbps * 2}k", "-movflags", "+faststart", str(small))
            if small.stat().st_size <= limit:
                return small.read_bytes()
        raise ExportTooLarge(limit)
