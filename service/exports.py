"""A game's shots as a face stitches them into one video (the bot's /export): the latest finished
turns that still have their clip, each clip's bytes read on its own (a face holds one clip at a
time), and the ffmpeg binary the workers encode with (the system's, else imageio-ffmpeg's)."""

from __future__ import annotations

from db import turn_reads
from inference.mp4 import ffmpeg_binary
from service.deps import Deps


async def shots(deps: Deps, session_id: int, count: int) -> list[turn_reads.Shot]:
    """The latest `count` finished shots of game `session_id` that still have their clip, oldest
    first (each a frozen value: the turn's id, number and clip length)."""
    async with deps.sessions() as s:
        return await turn_reads.exportable_shots(s, session_id, count)


async def clip(deps: Deps, turn_id: int) -> bytes | None:
    """One shot's MP4, in a short read of its own (None once pruned or taken down)."""
    async with deps.sessions() as s:
        return await turn_reads.clip_bytes(s, turn_id)


def encoder() -> str:
    """The ffmpeg binary the workers encode clips with, for joining them the same way."""
    return ffmpeg_binary()
