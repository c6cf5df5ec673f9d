"""/export's memory and time: a game of N finished turns, each with a clip of about 1 MB, stitched
by bot.answers.export.export_session (clips read one at a time, joined by ffmpeg, the video left on disk).

Prints the Python heap's peak during the export (tracemalloc: what the bot itself holds, ffmpeg
runs in its own process), the process's resident memory before and after, the seconds taken and
the video's size. The old /export held every clip in memory at once: N x clip size.

Run: PYTHONPATH=. python bench/export.py [--turns 100] [--clip-kb 1000]
Uses a throw-away database on ANIMEGAMER_TEST_PG (or the tests' embedded fallback).
"""

from __future__ import annotations

from _paths import ROOT  # noqa: F401  (first: the repository on sys.path)

import argparse
import asyncio
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from sqlalchemy import update

from bot.answers.export import export_session
from db.engine import make_engine, make_sessionmaker
from db.migrate import upgrade
from db.models import Turn
from inference.mp4 import encode_mp4
from service.deps import Deps
from service.jobs import StoredJobs
from settings import Settings
from testkit.pg import fresh_database
from testkit.queue import new_session, submit


def noisy_clip(kb: int) -> bytes:
    """An MP4 of 17 frames of noise, at about `kb` KB (noise does not compress)."""
    side = int((kb * 1024 / 17 / 1.2) ** 0.5) // 2 * 2
    frames = np.random.default_rng(0).integers(0, 256, (17, side, side, 3), dtype=np.uint8)
    return encode_mp4(frames, fps=8, crf=18, max_bytes=50 * 1024 * 1024)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


async def no_job(s, turn, gs) -> None:  # the turns are marked done below; no worker runs
    return None


async def main(turns: int, clip_kb: int) -> None:
    clip = noisy_clip(clip_kb)
    with fresh_database("agbench") as url:
        engine = make_engine(url)
        await upgrade(engine)
        sessions = make_sessionmaker(engine)
        gs = await new_session(sessions, channel_id=1)
        for _ in range(turns):
            t = await submit(sessions, gs, enqueue=no_job)
            async with sessions() as s, s.begin():
                await s.execute(update(Turn).where(Turn.id == t.id).values(
                    status="done", mp4=clip, mp4_size=len(clip), clip_seconds=17 / 8))
        del t
        limit = 500 * 1024 * 1024  # no re-encode: the export's own cost
        before = rss_mb()
        tracemalloc.start()
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            deps = Deps(Settings(database_url=url, _env_file=None), sessions, StoredJobs())
            done = await export_session(deps, gs.id, count=turns, limit=limit, out_dir=Path(tmp))
            size = done.path.stat().st_size
        seconds = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        after = rss_mb()
        await engine.dispose()
    print(f"export of {turns} shots, clip {len(clip) / 1024:.0f} KB ({turns * len(clip) / 2**20:.1f} MB of clips in all)")
    print(f"  python heap peak during export: {peak / 2**20:.1f} MB")
    print(f"  resident memory: {before:.0f} MB before, {after:.0f} MB after")
    print(f"  time: {seconds:.2f} s; video {size / 2**20:.1f} MB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--clip-kb", type=int, default=1000)
    a = ap.parse_args()
    asyncio.run(main(a.turns, a.clip_kb))
