"""Confidence intervals over games (the percentile bootstrap): a run's metric is the mean over all
its turns; resampling whole games with replacement keeps a game's turns together (they share a
character and a history, so they are not independent draws). Two runs over the same games are
compared paired (the same resampled games for both), which removes the games' own spread from the
difference; runs over different games are resampled each on their own.

A difference whose interval holds 0 is within the noise of this many games."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class GameValues:
    """One metric's values in each game: their sums and counts (turns not measured left out)."""

    ids: tuple[str, ...]
    sums: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, games: Sequence[tuple[str, Sequence[float | None]]]) -> GameValues:
        kept = [(gid, [v for v in vals if v is not None]) for gid, vals in games]
        kept = [(gid, vals) for gid, vals in kept if vals]
        return cls(tuple(g for g, _ in kept), np.array([sum(v) for _, v in kept], dtype=float),
                   np.array([len(v) for _, v in kept], dtype=float))

    def mean(self) -> float | None:
        return float(self.sums.sum() / self.counts.sum()) if len(self.ids) else None

    def subset(self, ids: Sequence[str]) -> GameValues:
        where = {g: i for i, g in enumerate(self.ids)}
        pick = [where[g] for g in ids]
        return GameValues(tuple(ids), self.sums[pick], self.counts[pick])


def _draws(n: int, rng: np.random.Generator, resamples: int) -> np.ndarray:
    return rng.integers(0, n, size=(resamples, n))


def _means(v: GameValues, idx: np.ndarray) -> np.ndarray:
    return v.sums[idx].sum(axis=1) / v.counts[idx].sum(axis=1)


def _interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def mean_ci(v: GameValues, *, seed: int = 0, resamples: int = RESAMPLES, level: float = LEVEL) -> tuple[float, float] | None:
    """The interval of a run's mean over its games; None with fewer than 2 games."""
    if len(v.ids) < 2:
        return None
    return _interval(_means(v, _draws(len(v.ids), np.random.default_rng(seed), resamples)), level)


@dataclass(frozen=True)
class Difference:
    baseline: float
    other: float
    difference: float  # other - baseline
    low: float | None
    high: float | None
    paired: bool
    games: int

    @property
    def within_noise(self) -> bool | None:
        return None if self.low is None or self.high is None else self.low <= 0.0 <= self.high


def difference_ci(a: GameValues, b: GameValues, *, seed: int = 0, resamples: int = RESAMPLES,
                  level: float = LEVEL) -> Difference | None:
    """b - a with its interval: paired when both measured the same games (at least 2), else each run
    resampled on its own. None when either has no values."""
    ma, mb = a.mean(), b.mean()
    if ma is None or mb is None:
        return None
    rng = np.random.default_rng(seed)
    if set(a.ids) == set(b.ids) and len(a.ids) >= 2:
        pb = b.subset(a.ids)  # b's games in a's order, so one draw picks the same games from both
        idx = _draws(len(a.ids), rng, resamples)
        low, high = _interval(_means(pb, idx) - _means(a, idx), level)
        return Difference(ma, mb, mb - ma, low, high, True, len(a.ids))
    if len(a.ids) < 2 or len(b.ids) < 2:
        return Difference(ma, mb, mb - ma, None, None, False, min(len(a.ids), len(b.ids)))
    diffs = _means(b, _draws(len(b.ids), rng, resamples)) - _means(a, _draws(len(a.ids), rng, resamples))
    low, high = _interval(diffs, level)
    return Difference(ma, mb, mb - ma, low, high, False, min(len(a.ids), len(b.ids)))
