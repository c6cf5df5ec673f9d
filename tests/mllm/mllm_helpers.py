"""Shared test data: instructions and history turns with random representations."""

from __future__ import annotations

import numpy as np

from inference.mllm.prompt import HistoryItem


def instruction(i: int) -> str:
    names = ["Qiqi", "Jiji", "Qiqi, Jiji"]
    motions = ["fly on the broomstick", "run", "eat"]
    return f"Character: {names[i % 3]}; Motion: quickly {motions[i % 3]}; Background: night {['sky', 'town', 'sea'][i % 3]}."


def history(n: int, seed: int = 0, rep_dim: int = 1920) -> list[HistoryItem]:
    rng = np.random.default_rng(seed)
    return [
        HistoryItem(
            instruction(i),
            tuple(int(v) for v in rng.integers(-5, 6, size=4)),
            rng.standard_normal((226, rep_dim)).astype(np.float32),
        )
        for i in range(n)
    ]
