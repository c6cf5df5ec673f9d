"""A contact sheet per game (PNG, drawn with PIL): one row per turn, its instruction and states
(asked, predicted, measured motion, scores) beside a strip of the clip's sampled frames."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from evaluation.metrics import LABELS, read_frames, sample_indices

THUMB_H = 96
TEXT_W = 460
PAD = 8
LINE = 16


def _fmt(value: float | None) -> str:
    return "n/m" if value is None else f"{value:.3f}"


def _lines(turn: dict) -> list[str]:
    asked, pred = turn["asked"], turn["predicted"]
    v = turn["values"]
    scores = "  ".join(f"{LABELS[k]} {_fmt(v.get(k))}" for k in ("clip_i", "dreamsim", "clip_t", "clip_t_e"))
    return [
        *textwrap.wrap(f"Turn {turn['turn']}: {turn['instruction']}", 62),
        f"asked:     level {asked['motion_level']}  social {asked['social']:+d}  "
        f"entertainment {asked['entertainment']:+d}  stamina {asked['stamina']:+d}",
        f"predicted: level {pred['motion_level']}  social {pred['social']:+d}  "
        f"entertainment {pred['entertainment']:+d}  stamina {pred['stamina']:+d}",
        f"clip's motion: level {turn['measured_level']} ({turn['motion_flow']:.2f} px/frame)  seed {turn['seed']}",
        scores,
    ]


def _strip(frames: np.ndarray) -> Image.Image:
    picked = [Image.fromarray(frames[i]) for i in sample_indices(len(frames))]
    w = max(1, round(picked[0].width * THUMB_H / picked[0].height))
    strip = Image.new("RGB", (len(picked) * (w + 2), THUMB_H), (20, 20, 20))
    for k, im in enumerate(picked):
        strip.paste(im.resize((w, THUMB_H), Image.Resampling.BILINEAR), (k * (w + 2), 0))
    return strip


def contact_sheet(out: Path, game: dict, path: Path) -> Path:
    """`game`: its report.json entry; the clips are read from the run folder `out`."""
    font = ImageFont.load_default(size=12)
    rows = []
    for turn in game["turns"]:
        strip = _strip(read_frames(out / turn["clip"]))
        lines = _lines(turn)
        h = max(strip.height, len(lines) * LINE) + 2 * PAD
        row = Image.new("RGB", (TEXT_W + strip.width + 2 * PAD, h), (255, 255, 255))
        d = ImageDraw.Draw(row)
        for n, text in enumerate(lines):
            d.text((PAD, PAD + n * LINE), text, font=font, fill=(20, 20, 20))
        row.paste(strip, (TEXT_W + PAD, PAD))
        rows.append(row)
    title = f"game {game['id']}  ({game['character']}, {len(rows)} turns)"
    width = max(r.width for r in rows)
    sheet = Image.new("RGB", (width, 28 + sum(r.height + 2 for r in rows)), (230, 230, 230))
    ImageDraw.Draw(sheet).text((PAD, 6), title, font=ImageFont.load_default(size=14), fill=(0, 0, 0))
    y = 28
    for r in rows:
        sheet.paste(r, (0, y))
        y += r.height + 2
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)
    return path
