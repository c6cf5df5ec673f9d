"""Real videos for the film tests and bench, made by ffmpeg's lavfi sources: shots joined by hard
cuts at known times, each a textured pan or a textured sprite moving at a known speed, a still,
black, or a fade.

Textures are blurred uniform noise on a colour that differs from shot to shot (so a cut changes
hue and brightness, as a real one does) and that optical flow can follow. Speeds are in source
pixels per second; at 720x480 and 8 fps a speed S moves S/8 pixels per clip frame.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

COLOURS = ("0x3060a0", "0xa04030", "0x40a050", "0xc0a040", "0x8040a0", "0x40a0a0", "0xd07090", "0x606060")


@dataclass(frozen=True)
class Shot:
    kind: str  # pan | sprite | still | black | fadein | fadeout
    seconds: float
    speed: float = 0.0  # pixels per second
    seed: int = 0
    fade: float = 0.0  # fadein/fadeout: the fade's length (0: the whole shot)
    side: int = 0  # sprite: its side in pixels (0: a quarter of the height)


def _texture(w: int, h: int, seed: int) -> str:
    colour = COLOURS[seed % len(COLOURS)]
    # Noise made at 1/16 size and scaled up: blobs a few pixels across, like painted detail, that
    # a fast pan moves smoothly (per-pixel noise would make every frame of a fast pan look new).
    sw, sh = (max(2, -(-n // 16) + (-(-n // 16)) % 2) for n in (w, h))  # even, for yuv420p
    return (f"color=c={colour}:s={sw}x{sh}:r=1:d=1,noise=alls=100:allf=u:all_seed={seed + 1},"
            f"scale={w}:{h}:flags=bicubic,loop=loop=-1:size=1:start=0")


def _shot(s: Shot, fps: int, w: int, h: int, label: str) -> str:
    # Crop positions are whole pixels, so a pan advances in 1-pixel steps at its average speed.
    if s.kind == "pan":
        span = w + int(s.speed * s.seconds) + 8
        chain = f"{_texture(span, h, s.seed)},fps={fps},crop={w}:{h}:x='floor(t*{s.speed})':y=0"
    elif s.kind == "sprite":
        side = s.side or h // 4
        chain = (f"{_texture(w, h, s.seed)},fps={fps}[bg{label}];{_texture(side, side, s.seed + 50)},fps={fps}[sp{label}];"
                 f"[bg{label}][sp{label}]overlay=x='16+floor(t*{s.speed})':y={h // 2 - side // 2}")
    elif s.kind in ("still", "fadein", "fadeout"):
        chain = f"{_texture(w, h, s.seed)},fps={fps}"
        if s.kind == "fadein":
            chain += f",fade=t=in:st=0:d={s.fade or s.seconds}"
        elif s.kind == "fadeout":
            chain += f",fade=t=out:st={s.seconds - (s.fade or s.seconds)}:d={s.fade or s.seconds}"
    elif s.kind == "black":
        chain = f"color=c=black:s={w}x{h}:r={fps}"
    else:
        raise ValueError(s.kind)
    return f"{chain},trim=duration={s.seconds},setpts=PTS-STARTPTS,format=yuv420p,setsar=1[v{label}]"


def make_video(path: Path, shots: list[Shot], fps: int = 24, size: tuple[int, int] = (720, 480),
               preset: str = "ultrafast", crf: int = 18) -> list[float]:
    """Write the shots back to back as an H.264 MP4; returns the cut times (seconds)."""
    w, h = size
    parts = [_shot(s, fps, w, h, str(i)) for i, s in enumerate(shots)]
    graph = ";".join(parts) + ";" + "".join(f"[v{i}]" for i in range(len(shots))) + f"concat=n={len(shots)}:v=1:a=0[out]"
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-filter_complex", graph, "-map", "[out]",
                    "-c:v", "libx264", "-preset", preset, "-crf", str(crf), "-pix_fmt", "yuv420p", "-r", str(fps),
                    str(path)], check=True)
    cuts, t = [], 0.0
    for s in shots[:-1]:
        t += s.seconds
        cuts.append(t)
    return cuts
