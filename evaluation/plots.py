"""Plots of each metric (PNG, matplotlib's Agg backend: no display needed): its value per run
(mode, preset, backend) with the 95 % interval over games, and per turn index of the games."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, whatever DISPLAY says

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

from evaluation.metrics import BETTER, LABELS  # noqa: E402


@dataclass(frozen=True)
class Series:
    label: str  # the run: "animegamer offload_int4 fast"
    value: float | None
    ci: tuple[float, float] | None
    by_turn: list[float | None]  # the value at turn 1, 2, ... of the games


def _file(folder: Path, key: str, kind: str) -> Path:
    return folder / f"{key}_by_{kind}.png"


def by_run(folder: Path, key: str, series: list[Series]) -> Path | None:
    shown = [s for s in series if s.value is not None]
    if not shown:
        return None
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(shown) + 2), 3.4), dpi=100)
    x = range(len(shown))
    values = [s.value or 0.0 for s in shown]
    # a percentile interval need not hold the point estimate: clamped, as error bars cannot be negative
    low = [max(0.0, (s.value or 0.0) - s.ci[0]) if s.ci else 0.0 for s in shown]
    high = [max(0.0, s.ci[1] - (s.value or 0.0)) if s.ci else 0.0 for s in shown]
    ax.bar(x, values, yerr=[low, high], capsize=4, color="#4878a8")
    ax.set_xticks(list(x), [s.label for s in shown], rotation=15, ha="right", fontsize=8)
    ax.set_ylabel(LABELS[key])
    ax.set_title(f"{LABELS[key]} per run ({BETTER[key]}er is better; bars: 95 % CI over games)", fontsize=9)
    fig.tight_layout()
    path = _file(folder, key, "run")
    fig.savefig(path)
    plt.close(fig)
    return path


def by_turn(folder: Path, key: str, series: list[Series]) -> Path | None:
    shown = [s for s in series if any(v is not None for v in s.by_turn)]
    if not shown:
        return None
    fig, ax = plt.subplots(figsize=(5.0, 3.4), dpi=100)
    for s in shown:
        points = [(i + 1, v) for i, v in enumerate(s.by_turn) if v is not None]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=s.label)
    ax.set_xlabel("turn of the game")
    ax.set_ylabel(LABELS[key])
    ax.set_xticks(range(1, max(len(s.by_turn) for s in shown) + 1))
    ax.set_title(f"{LABELS[key]} per turn index ({BETTER[key]}er is better)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = _file(folder, key, "turn")
    fig.savefig(path)
    plt.close(fig)
    return path


def write_plots(folder: Path, keys: list[str], series: dict[str, list[Series]]) -> list[Path]:
    """Both plots of each metric that has values; the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for key in keys:
        for draw in (by_run, by_turn):
            path = draw(folder, key, series[key])
            if path is not None:
                written.append(path)
    return written
