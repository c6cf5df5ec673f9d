"""The AnimeGamer backend: MLLM (next state) + clip decoder (video) behind the worker's Backend.

The MLLM comes from `inference.mllm`; the decoder is any object with the `ClipDecoder` protocol,
passed in or built by a factory at load time (its implementation is a separate component). A
backend without a decoder refuses to load unless `mllm_only` is set (benchmarks): then turns
carry the prediction and representation but no clip.

Concurrent turns (worker `--concurrency N`) share the GPU in batches at both stages: the MLLM
micro-batcher runs them as one padded forward, then a second micro-batcher hands their
representations to the decoder's `decode_batch` as one batch (B sessions x guidance), under the
decoder's GPU lock; each turn keeps its own timings.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contracts.turn import ProgressCallback, TurnRequest, TurnResult, scaled
from game.motion import motion_scope
from game.states import Prediction
from inference.backend import BackendError, BatchClipDecoder, ClipDecoder
from inference.backends.clip_batch import decode_together, outcome
from inference.mllm.batcher import MicroBatcher, close_all
from inference.mp4 import encode_mp4

log = logging.getLogger(__name__)

DEFAULT_FPS = 8


# predict(request) -> (prediction, representation, stage timings)
Predict = Callable[[TurnRequest], tuple[Prediction, np.ndarray, dict]]
# decode(representation, motion scope, seed, progress) -> (frames, fps, extra timings)
Decode = Callable[[np.ndarray, float, int, ProgressCallback], tuple[np.ndarray, int, dict]]


def play_turn(
    request: TurnRequest, progress: ProgressCallback, predict: Predict, decode: Decode | None,
    settings: AnimeGamerSettings,
) -> TurnResult:
    """The stages of one model turn, shared by the one-film and the multi-film backends: the MLLM,
    the decoder (None: mllm_only, no clip), the MP4; progress and per-stage timings."""
    t0 = time.perf_counter()
    progress(0.0, "mllm")
    prediction, rep, stage = predict(request)
    timings = {"mllm": time.perf_counter() - t0, **{f"mllm_{k}": v for k, v in stage.items()}}
    # From the motion level (index 0), not social as the released demo app did.
    scope = motion_scope(prediction.motion_level, settings.motion_scope_map, settings.motion_scope_otherwise)
    if decode is None:
        progress(1.0, "done")
        return TurnResult(prediction, scope, None, rep, timings=timings)
    progress(0.1, "decode")
    t1 = time.perf_counter()

    frames, fps, extra = decode(rep, scope, request.seed, scaled(progress, 0.1, 0.8))  # keeps its previews
    timings.update(extra)
    timings["decode"] = time.perf_counter() - t1
    progress(0.9, "encode")
    t2 = time.perf_counter()
    mp4 = encode_mp4(frames, fps=fps)
    timings["encode"] = time.perf_counter() - t2
    progress(1.0, "done")
    return TurnResult(prediction, scope, mp4, rep, timings=timings, clip_seconds=len(frames) / fps)


def clip_fps(decoder) -> int:
    """The frame rate of a decoder's clips (the released decoder's 8 unless it says otherwise)."""
    return int(getattr(decoder, "fps", DEFAULT_FPS) or DEFAULT_FPS)


def prompt_history(request: TurnRequest) -> list:
    """The session's earlier turns as the MLLM prompt takes them (`HistoryItem`s)."""
    from inference.mllm.prompt import HistoryItem

    return [
        HistoryItem(h.instruction, h.prediction.as_tuple(), np.asarray(h.representation))
        for h in request.history
        if h.representation is not None  # a preview turn has no representation to feed back
    ]


@dataclass(frozen=True)
class AnimeGamerSettings:
    mistral_dir: str | Path  # Mistral-7B-Instruct-v0.1 (transformers format)
    tokenizer_dir: str | Path  # the released animegamer_tokenizer directory
    agent_path: str | Path  # the film's MLLM checkpoint: pytorch_model.bin or .safetensors
    device: str | None = None  # default: cuda if available, else cpu
    dtype: str | None = None  # default: bf16 on GPU, float32 on CPU
    history_window: int = 0  # earlier turns in the prompt; 0 = the released demo, 1-5 = training
    readout: str = "released"  # or "query" (see inference.mllm.predict)
    state_pass: str = "training"  # or "released_causal"
    use_cache: bool = True
    attn_implementation: str = "sdpa"
    mllm_only: bool = False  # no decoder: turns get no clip (benchmarks)
    rep_dim: int = 1920  # representation width (the decoder's conditioning width)
    motion_scope_map: Mapping[int, float] | None = None  # None: the released batch script's table
    motion_scope_otherwise: float | None = None  # None: the released batch script's value
    max_batch: int = 4  # concurrent turns (of different sessions) sharing one MLLM pass; 1 = off
    batch_window: float = 0.02  # seconds the first turn waits for others to join its batch
    quantize: str | None = None  # "int8" / "int4": quantised MLLM weights (inference.mllm.quantize)
    offload: bool = False  # stage offload: one stage's weights on the GPU at a time (inference.memory.offload)


class AnimeGamerBackend:
    name = "animegamer"
    is_preview = False

    def __init__(
        self,
        settings: AnimeGamerSettings,
        decoder: ClipDecoder | None = None,
        decoder_factory: Callable[[], ClipDecoder] | None = None,
        loaded_mllm=None,
    ):
        """loaded_mllm: an already built `LoadedMLLM` (benchmarks with random full-size weights)."""
        self.settings = settings
        self.decoder = decoder
        self._decoder_factory = decoder_factory
        self._loaded_mllm = loaded_mllm
        self._decode_batcher: MicroBatcher | None = None  # set at load when the decoder batches
        self._mllm = None  # (predictor, prompt builder) once loaded
        self._lock = threading.Lock()  # one forward at a time on the shared model
        self._batcher: MicroBatcher | None = None  # set at load when max_batch > 1
        self.offload = None  # a StageOffload once loaded with settings.offload

    # -- Backend ----------------------------------------------------------------------------

    def load(self) -> None:
        if self._mllm is not None:
            return
        s = self.settings
        if self.decoder is None and self._decoder_factory is None and not s.mllm_only:
            raise BackendError(
                "the animegamer backend needs a clip decoder: pass `decoder=` or `decoder_factory=` "
                "(or set mllm_only=True to run the MLLM alone, for benchmarks)"
            )
        from inference.mllm.instruction import InstructionEncoder
        from inference.mllm.loading import CheckpointError, load_mllm
        from inference.mllm.predict import MLLMPredictor, PredictOptions
        from inference.mllm.prompt import PromptBuilder
        from inference.mllm.tokens import TokenizerMismatch

        t0 = time.perf_counter()
        try:
            loaded = self._loaded_mllm or load_mllm(
                s.mistral_dir, s.tokenizer_dir, s.agent_path, device=s.device, dtype=s.dtype,
                attn_implementation=s.attn_implementation, rep_dim=s.rep_dim, quantize=s.quantize,
                staged=s.offload,
            )
        except (CheckpointError, TokenizerMismatch, FileNotFoundError) as e:
            raise BackendError(f"cannot load the AnimeGamer MLLM: {e}") from e
        options = PredictOptions(readout=s.readout, state_pass=s.state_pass, use_cache=s.use_cache)
        predictor = MLLMPredictor(loaded.model, loaded.special, options)
        builder = PromptBuilder(InstructionEncoder(loaded.tokenizer, loaded.special), loaded.special, s.history_window)
        log.info("MLLM loaded in %.1f s (%s)", time.perf_counter() - t0, loaded.report.summary())
        if self.decoder is None and self._decoder_factory is not None:
            self.decoder = self._decoder_factory()
        if self.decoder is not None and not isinstance(self.decoder, ClipDecoder):
            raise BackendError(f"{type(self.decoder).__name__} does not implement ClipDecoder")
        self._mllm = (predictor, builder)
        if s.offload:
            from inference.memory.offload import offload_turn
            from inference.mllm.loading import default_device_dtype

            self.offload = offload_turn(loaded.model, self.decoder, default_device_dtype(s.device)[0])
            with self.offload.stage("mllm"):  # the predictor keeps a few constants on the model's device
                self._mllm = (MLLMPredictor(loaded.model, loaded.special, options), builder)
        if s.max_batch > 1:
            self._batcher = MicroBatcher(self._predict_with_timings, s.max_batch, s.batch_window)
            if isinstance(self.decoder, BatchClipDecoder):
                self._decode_batcher = MicroBatcher(self._decode_items, s.max_batch, s.batch_window)

    def generate(self, request: TurnRequest, progress: ProgressCallback) -> TurnResult:
        self._require_loaded()
        predict = self._batcher.submit if self._batcher else (lambda r: self._predict_with_timings([r])[0])
        return play_turn(request, progress, predict, None if self.decoder is None else self._decode, self.settings)

    def _decode(self, rep, scope: float, seed: int, progress: ProgressCallback) -> tuple[np.ndarray, int, dict]:
        decoder = self.decoder
        if decoder is None:  # generate hands _decode to play_turn only when there is a decoder
            raise BackendError("this backend has no video decoder (MLLM only)")
        if self._decode_batcher is not None:
            frames, timings = outcome(self._decode_batcher.submit((rep, scope, seed, progress)))
        else:
            # the same call as a batch of one: the turn keeps its denoise and VAE seconds
            frames, timings = outcome(self._decode_items([(rep, scope, seed, progress)])[0])
        return frames, clip_fps(decoder), timings

    def _decode_items(self, items):
        """A batch's clips, with the decoder's weights on the GPU in the offload modes."""
        decoder = self.decoder
        if decoder is None:
            raise BackendError("this backend has no video decoder (MLLM only)")
        with self.offload.stage("dit", "vae") if self.offload else contextlib.nullcontext():
            return decode_together(decoder, items)

    def close(self) -> None:
        """Stop the batching threads, which hold the models; the backend can load() again after."""
        close_all(self._batcher, self._decode_batcher)
        self._batcher = self._decode_batcher = None
        self._mllm = None

    # -- batched MLLM, for a worker serving many channels ------------------------------------

    def predict(self, requests: Sequence[TurnRequest]) -> list[tuple[Prediction, np.ndarray]]:
        """The MLLM part of several sessions' turns in one batched forward pass."""
        return [(p, rep) for p, rep, _ in self._predict_with_timings(requests)] if requests else []

    def _predict_with_timings(self, requests: Sequence[TurnRequest]) -> list[tuple[Prediction, np.ndarray, dict]]:
        predictor, builder = self._require_loaded()
        prompts = [builder.build(r.instruction, prompt_history(r)) for r in requests]
        with self._lock, self.offload.stage("mllm") if self.offload else contextlib.nullcontext():
            outs = predictor.predict_batch(prompts)
        return [(Prediction.from_sequence(o.values), o.representation, o.timings) for o in outs]

    def _require_loaded(self):
        if self._mllm is None:
            raise BackendError("the animegamer backend is not loaded (call load() first)")
        return self._mllm
