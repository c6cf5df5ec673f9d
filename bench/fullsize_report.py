"""What bench/fullsize.py reports: a mode's rows (one per stage, measured beside predicted), the
Markdown table of them, and the machine and library versions they were measured on."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

import torch

from inference.memory.live import GiB


@dataclass
class StageRow:
    name: str
    seconds: float = float("nan")
    rss: int = 0  # high-water mark during the stage
    live: int = 0  # peak live tensor bytes (dispatch count)
    largest: str = ""
    predicted: int = 0
    note: str = ""


@dataclass
class ModeRun:
    mode: str
    rows: list[StageRow] = field(default_factory=list)
    note: str = ""
    mp4_bytes: int = 0


def gib(n: int) -> str:
    if not n:
        return "—"
    return f"{n / GiB:.2f}" if n >= GiB / 100 else f"{n / GiB:.4f}"  # (the tiny models' stages)


def table(runs: list[ModeRun], steps: int) -> str:
    head = ("| mode | stage | seconds | peak RSS GiB | live tensors GiB (measured) | predicted GiB "
            "| predicted / measured | largest tensor | note |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for run in runs:
        for r in run.rows:
            ratio = f"{r.predicted / r.live:.3f}" if r.live and r.predicted else "—"
            secs = f"{r.seconds:.1f}" if r.seconds == r.seconds else "—"
            label = r.name if r.name != "denoise" else f"denoise ({steps} steps)"
            lines.append(f"| {run.mode} | {label} | {secs} | {gib(r.rss)} | {gib(r.live)} | {gib(r.predicted)} "
                         f"| {ratio} | {r.largest or '—'} | {r.note} |")
    return "\n".join(lines)


def environment() -> str:
    import diffusers
    import transformers

    cpu = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torchao

        ao = f"torchao {torchao.__version__}"
    except ImportError:
        ao = "torchao absent"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GiB
    return (f"{cpu}, {torch.get_num_threads()} threads, {mem:.1f} GiB RAM; python {platform.python_version()}, "
            f"torch {torch.__version__}, transformers {transformers.__version__}, diffusers {diffusers.__version__}, {ao}")
