"""How fast `animegamer film prepare` turns film into clips: seconds of film prepared per second
of wall time, for the cut, clip and motion stages (captioning excluded), on a synthetic film.

    python bench/film_prepare.py                      # a 10-minute 720x480 film, made once in --work
    python bench/film_prepare.py --minutes 20 --size 1280x720

The film is made by ffmpeg's lavfi sources (testkit/lavfi.py): shots of 2-8 s joined by hard
cuts, textured pans and sprites at known speeds from still to 40 px a clip frame, and a few
stills and black shots that are skipped, as a film has. First each stage is timed on its own
(the library calls prepare makes), then `film prepare --captioner none` end to end into a fresh
folder, which is the figure that counts (it does cuts, then clips and motion in one pass).
Prints wall and CPU seconds (CPU: this process, all its threads; on a machine shared with other
work the wall figure suffers, the CPU one much less). Nothing is asserted. The goal: at least 6x
real time on 2 cores.
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from film import clips as clipping
from film.cut import find_cuts
from film.frames import CLIP_FRAMES, sample_spans
from film.motion import measure_frames
from film.prepare import prepare
from testkit.lavfi import Shot, make_video

SPEEDS = (4, 12, 20, 40, 80, 120, 160)  # px/s at 24 fps (/8: px a clip frame)


def film_shots(minutes: float, seed: int = 7) -> list[Shot]:
    rng = random.Random(seed)
    shots: list[Shot] = []
    total = 0.0
    while total < minutes * 60:
        seconds = rng.choice((2.0, 3.0, 4.0, 5.0, 6.0, 8.0))
        roll = rng.random()
        if roll < 0.05:
            shot = Shot("black", seconds)
        elif roll < 0.12:
            shot = Shot("still", seconds, 0, len(shots))
        elif roll < 0.55:
            shot = Shot("pan", seconds, rng.choice(SPEEDS), len(shots))
        else:
            shot = Shot("sprite", seconds, rng.choice((*SPEEDS, 240, 320)), len(shots))
        shots.append(shot)
        total += seconds
    return shots


class Clock:
    """Wall and CPU seconds (this process, all its threads) added up per part."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._at = (time.perf_counter(), time.process_time())

    def lap(self, part: str) -> None:
        now = (time.perf_counter(), time.process_time())
        self.wall[part] = self.wall.get(part, 0.0) + now[0] - self._at[0]
        self.cpu[part] = self.cpu.get(part, 0.0) + now[1] - self._at[1]
        self._at = now


def stage_times(video: Path, out: Path) -> tuple[Clock, int]:
    """Seconds spent in each part, as prepare's stages call them."""
    clock = Clock()
    cuts = find_cuts(video, str(video))
    clock.lap("cuts")
    spans = [(start, CLIP_FRAMES) for s in cuts.shots for start in clipping.clip_starts(s)]
    for i, frames in sample_spans(video, spans, cuts.origin, (cuts.width, cuts.height)):
        clock.lap("clips: decode, 8 fps, resize")
        clipping.write_clip(out, f"bench-{i:05d}", frames)
        clock.lap("clips: MP4 and stills")
        measure_frames(frames)
        clock.lap("motion")
    return clock, len(spans)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--size", default="720x480", help="the synthetic film's frame size (default 720x480)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "animegamer-bench-film",
                    help="where the film is made (kept and reused) and prepared")
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    args.work.mkdir(parents=True, exist_ok=True)
    video = args.work / f"film-{args.minutes:g}min-{w}x{h}.mp4"
    if not video.exists():
        t0 = time.perf_counter()
        make_video(video, film_shots(args.minutes), size=(w, h), preset="veryfast", crf=20)
        print(f"made {video} in {time.perf_counter() - t0:.0f} s")
    import av

    with av.open(str(video)) as c:
        s = c.streams.video[0]
        seconds = float(s.duration * s.time_base) if s.duration and s.time_base else 0.0
    print(f"film: {seconds:.0f} s, {w}x{h}, 24 fps; {os.cpu_count()} CPU(s); OpenCV threads {cv2.getNumThreads()}")

    out = args.work / "stages-alone"
    shutil.rmtree(out, ignore_errors=True)
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    clock, n = stage_times(video, out)
    print(f"{n} clips; film seconds per second: of wall time (of this process's CPU time, all threads)")
    for name, t in clock.wall.items():
        print(f"  {name:38} {t:7.1f} s  {seconds / t:6.1f}x real time  (CPU {clock.cpu[name]:6.1f} s, {seconds / clock.cpu[name]:5.1f}x)")
    total, cpu = sum(clock.wall.values()), sum(clock.cpu.values())
    print(f"  {'stages together':38} {total:7.1f} s  {seconds / total:6.1f}x real time  (CPU {cpu:6.1f} s, {seconds / cpu:5.1f}x)")

    folder = args.work / "prepared"
    shutil.rmtree(folder, ignore_errors=True)
    cast = args.work / "cast.toml"
    cv2.imwrite(str(args.work / "ref.png"), np.zeros((8, 8, 3), np.uint8))
    cast.write_text('[[characters]]\nid = "hero"\nname = "Hero"\nreference = "ref.png"\n', encoding="utf-8")
    clock = Clock()
    status = prepare([video], folder, cast, captioner="none", progress=False)
    clock.lap("prepare")
    t, cpu = clock.wall["prepare"], clock.cpu["prepare"]
    print(f"  {'film prepare end to end (exit ' + str(status) + ')':38} {t:7.1f} s  {seconds / t:6.1f}x real time  "
          f"(CPU {cpu:6.1f} s, {seconds / cpu:5.1f}x)")
    print(f"  a 2-hour film at this rate: {7200 / (seconds / t) / 60:.0f} min; load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
