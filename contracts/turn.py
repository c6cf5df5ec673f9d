"""The turn's contracts: what a worker asks of a model backend and what it gets back.

These dataclasses sit below the database and the inference layers so that both can speak of a
turn (the database builds requests and stores results; backends read and produce them) without
either depending on the other. Only the game's rules sit below them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from game.states import CharacterState, Prediction

# progress(fraction 0..1, stage label such as "mllm", "denoise 12/50", "vae", "encode")
ProgressCallback = Callable[[float, str], None]


class PreviewSink(Protocol):
    """Where a turn's stages hand pictures of the clip forming (inference.previews.TurnPreviews).
    It decides whether one is due, and makes the still off the caller's thread."""

    def offer(self, step: int, total: int, picture: Callable[[], Any]) -> None:
        """At `step` of `total`: if a preview is due, call `picture()` (an RGB image: uint8
        (H, W, 3), or a float (3, H, W) tensor in [-1, 1]) and make a still of it."""

    def callback_on_step_end(self, pipe: Any, step_index: int, timestep: int, callback_kwargs: dict) -> dict:
        """diffusers' step callback for one clip: offers pipe.preview_rgb(callback_kwargs["x0"])."""
        ...


class Progress:
    """A ProgressCallback that carries the turn's preview sink down to the stage that can make
    previews (the decoder's steps, the preview backend's frames). Plain callables work too: they
    carry none."""

    def __init__(self, report: ProgressCallback, previews: PreviewSink | None = None) -> None:
        self.report = report
        self.previews = previews

    def __call__(self, fraction: float, stage: str) -> None:
        self.report(fraction, stage)


def previews_of(progress: ProgressCallback | None) -> PreviewSink | None:
    return getattr(progress, "previews", None)


def scaled(progress: ProgressCallback, start: float, span: float) -> Progress:
    """progress(start + span * f) for f in 0..1, keeping its preview sink."""
    return Progress(lambda f, stage: progress(start + span * max(0.0, min(1.0, f)), stage), previews_of(progress))


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
