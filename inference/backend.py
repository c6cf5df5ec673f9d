"""What a worker asks of a model backend, and what it gets back.

A backend turns one queued turn (instruction plus the session's context) into a result: the
predicted state values, the action representation and the MP4 clip. The worker runs `generate`
in a thread, so a backend may block; it reports progress through the callback (the worker
throttles what it stores and announces).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class Backend(Protocol):
    name: str
    is_preview: bool

    def load(self) -> None:
        """Load models once, before the first turn (may take minutes)."""

    def generate(self, request: TurnRequest, progress: ProgressCallback) -> TurnResult: ...


@runtime_checkable
class ClipDecoder(Protocol):
    """Representation -> video frames (the AnimeGamer video diffusion decoder)."""

    fps: int

    def decode(
        self,
        representation: np.ndarray,
        motion_scope: float,
        seed: int,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Return frames as uint8 (T, H, W, 3)."""


class BackendError(RuntimeError):
    """A turn could not be generated; the message is shown to players."""
