"""The bootstrap intervals over games, on synthetic runs whose true difference is known."""

from __future__ import annotations

import numpy as np

from evaluation.compare import GameValues, difference_ci, mean_ci

TRUE_SHIFT = 0.05


def _runs(rng: np.random.Generator, games: int = 30, turns: int = 4) -> tuple[GameValues, GameValues]:
    """Run b is run a's games with every value moved by TRUE_SHIFT plus turn noise; games differ
    from each other far more than the shift (the spread that pairing removes)."""
    level = rng.normal(0.6, 0.15, games)
    a = [(f"g{i}", list(level[i] + rng.normal(0, 0.05, turns))) for i in range(games)]
    b = [(f"g{i}", list(level[i] + TRUE_SHIFT + rng.normal(0, 0.05, turns))) for i in range(games)]
    return GameValues.of(a), GameValues.of(b)


def test_paired_intervals_cover_the_true_difference_about_95_percent():
    rng = np.random.default_rng(7)
    covered = 0
    draws = 200
    for k in range(draws):
        a, b = _runs(rng)
        d = difference_ci(a, b, seed=k, resamples=1000)
        assert d is not None and d.paired and d.low is not None and d.high is not None
        covered += d.low <= TRUE_SHIFT <= d.high
    assert 0.88 <= covered / draws <= 0.99, covered


def test_a_shift_beyond_the_noise_and_none_within_it():
    a, b = _runs(np.random.default_rng(1), games=40)
    d = difference_ci(a, b)
    assert d is not None and d.within_noise is False and d.low is not None and d.low > 0
    same = difference_ci(a, a)
    assert same is not None and same.difference == 0 and same.within_noise is True


def test_unpaired_when_the_games_differ_and_the_mean_interval():
    a, b = _runs(np.random.default_rng(2))
    other = GameValues(tuple(f"h{i}" for i in range(len(b.ids))), b.sums, b.counts)
    d = difference_ci(a, other)
    assert d is not None and not d.paired and d.low is not None and d.high is not None and d.low < d.high
    ci = mean_ci(a)
    mean = a.mean()
    assert ci is not None and mean is not None and ci[0] < mean < ci[1]
    assert mean_ci(a.subset(a.ids[:1])) is None  # one game: no interval


def test_unmeasured_turns_are_left_out():
    v = GameValues.of([("g1", [1.0, None, 3.0]), ("g2", [None, None])])
    assert v.ids == ("g1",) and v.mean() == 2.0
    assert difference_ci(v, GameValues.of([("g1", [None])])) is None
