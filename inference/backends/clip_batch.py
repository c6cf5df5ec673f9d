"""Concurrent turns' clips decoded together: one `decode_batch_timed` call (B sessions x guidance
per DiT forward) for the turns that wait on the same decoder, instead of B calls queued on its
GPU lock. Used by the one-film backend and, grouped by film, by the multi-film backend.

A turn's progress callback raising (the turn was cancelled) fails that turn alone: its error is
handed back to its own thread and the batch goes on for the others. A turn whose progress carries
a preview sink (contracts.turn.Progress) gets its own row of each step's clean-latent estimate,
through the decoder's diffusers-shaped step callback, when the decoder takes one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contracts.turn import ProgressCallback, previews_of
from inference.backend import BatchClipDecoder, ClipDecoder

# One turn's share of a batch: (representation, motion scope, seed, progress callback).
ClipItem = tuple[np.ndarray, float, int, ProgressCallback]
# What each turn gets back: (frames, timings, the error that ends this turn or None).
ClipOutcome = tuple[np.ndarray | None, dict, BaseException | None]


def decode_together(decoder: ClipDecoder, items: Sequence[ClipItem]) -> list[ClipOutcome]:
    """Decode the items' clips, as one batch when the decoder batches (each turn gets the batch's
    timings, prefixed `decode_`), otherwise one after another."""
    if not isinstance(decoder, BatchClipDecoder):
        return [_decode_alone(decoder, item) for item in items]
    reps, scopes, seeds, callbacks = zip(*items, strict=True)
    errors: dict[int, BaseException] = {}

    def progress(fraction: float, label: str) -> None:
        for i, cb in enumerate(callbacks):
            if i not in errors:
                try:
                    cb(fraction, label)
                except Exception as e:  # noqa: BLE001  (handed back to that turn's thread)
                    errors[i] = e

    sinks = [previews_of(cb) for cb in callbacks]

    def on_step_end(pipe, step_index: int, timestep: int, tensors: dict) -> dict:
        for i, sink in enumerate(sinks):  # each turn sees its own row (a sink never raises)
            if sink is not None and i not in errors:
                sink.callback_on_step_end(pipe, step_index, timestep, {k: v[i : i + 1] for k, v in tensors.items()})
        return {}

    steps = {}
    if any(sinks) and "x0" in getattr(decoder, "callback_tensor_inputs", ()):
        steps = {"callback_on_step_end": on_step_end, "callback_on_step_end_tensor_inputs": ("x0",)}
    frames, timings = decoder.decode_batch_timed(list(reps), list(scopes), list(seeds), progress, **steps)
    stage = {f"decode_{k}": v for k, v in timings.items()}
    return [(frames[i], dict(stage), errors.get(i)) for i in range(len(items))]


def _decode_alone(decoder: ClipDecoder, item: ClipItem) -> ClipOutcome:
    rep, scope, seed, progress = item
    try:
        return decoder.decode(rep, scope, seed, progress), {}, None
    except Exception as e:  # noqa: BLE001  (this turn's error, not the batch's)
        return None, {}, e


def outcome(result: ClipOutcome) -> tuple[np.ndarray, dict]:
    """In the turn's own thread: its frames and timings, or its error raised."""
    frames, timings, error = result
    if error is not None:
        raise error
    if frames is None:  # decode_together pairs every missing clip with its error
        raise RuntimeError("a clip came back with neither frames nor an error")
    return frames, timings
