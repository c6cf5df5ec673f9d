"""The turn's contracts: what a worker asks of a model backend and what it gets back.

These dataclasses sit below the database and the inference layers so that both can speak of a
turn (the database builds requests and stores results; backends read and produce them) without
either depending on the other. Only the game's rules sit below them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from game.states import CharacterState, Prediction

# progress(fraction 0..1, stage label such as "mllm", "denoise 12/50", "vae", "encode")
ProgressCallback = Callable[[float, str], None]


@dataclass(frozen=True)
class HistoryTurn:
    """One earlier, successfully generated turn of the session (oldest first in a context)."""

    instruction: str
    prediction: Prediction
    representation: np.ndarray | None  # (226, 1920) float32; None for preview turns


@dataclass(frozen=True)
class TurnRequest:
    turn_id: int
    session_id: int
    film_id: str
    instruction: str  # the final text, exactly as the model reads it
    characters: tuple[str, ...]  # display names of the characters in the shot
    motion: str
    adverb: str
    background: str
    time_of_day: str
    seed: int
    states_before: dict[str, CharacterState] = field(default_factory=dict)  # by character name
    history: tuple[HistoryTurn, ...] = ()  # the last good turns, oldest first


@dataclass
class TurnResult:
    prediction: Prediction
    motion_scope: float
    mp4: bytes | None  # None only when rendering is switched off (benchmarks)
    representation: np.ndarray | None = None  # (226, 1920) float32
    is_preview: bool = False
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    clip_seconds: float | None = None  # the MP4's length: its frames / its fps
