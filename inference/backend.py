"""The model backend interface: what the worker calls to turn a request into a result.

A backend turns one queued turn (instruction plus the session's context) into a result: the
predicted state values, the action representation and the MP4 clip. The worker runs `generate`
in a thread, so a backend may block; it reports progress through the callback (the worker
throttles what it stores and announces).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from contracts.turn import ProgressCallback, TurnRequest, TurnResult


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
        ...


@runtime_checkable
class BatchClipDecoder(ClipDecoder, Protocol):
    """A ClipDecoder that decodes several sessions' clips in one batch (the GPU decoder)."""

    def decode_batch_timed(
        self,
        representations,
        motion_scopes,
        seeds,
        progress: ProgressCallback | None = None,
    ) -> tuple[np.ndarray, dict[str, float]]:
        """Frames (B, T, H, W, 3) uint8, row i as decode(rep_i, scope_i, seed_i), and this call's timings."""
        ...


class BackendError(RuntimeError):
    """A turn could not be generated; the message is shown to players."""
