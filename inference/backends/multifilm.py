"""One model worker serving several films: Mistral-7B loaded once, each film an adapter.

The MLLM is `inference.mllm.adapters.MultiFilmMLLM`: each film's agent checkpoint becomes a peft
adapter (its LoRA plus its own norms, embeddings and lm_head) with its own projections. Turns of
different sessions share a forward pass as in the single-film backend (micro-batching), but a
batch is always one film: the gathered turns are grouped by film and each group runs with its
adapter active. The decoders (one CogVideoX DiT + VAE per film) are kept on the GPU while the
budget allows and otherwise moved from pinned CPU memory (`inference.decoder.residency`); the
clips of concurrent turns are decoded likewise, one batch per film (`clip_batch`). The seconds
spent switching adapters and moving a decoder are part of the turn's timings.

Outputs are those of each film loaded alone (tests/mllm/test_multifilm.py checks it to 1e-5 in
float32): the single-film path merges its LoRA into the weights, this one keeps it unmerged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from contracts.turn import ProgressCallback, TurnRequest, TurnResult
from game.states import Prediction
from inference.backend import BackendError, ClipDecoder
from inference.backends.animegamer import DEFAULT_FPS, AnimeGamerSettings, clip_fps, play_turn, prompt_history
from inference.backends.clip_batch import ClipItem, ClipOutcome, decode_together, outcome
from inference.mllm.batcher import MicroBatcher, close_all

if TYPE_CHECKING:
    from inference.decoder.residency import DecoderResidency
    from inference.mllm.adapters import MultiFilmMLLM
    from inference.mllm.prompt import PromptBuilder

log = logging.getLogger(__name__)

DECODER_RESERVE_BYTES = 16 * 2**30  # GPU memory left for the decoder's activations when the budget is detected


class MultiFilmBackend:
    name = "animegamer"
    is_preview = False

    def __init__(
        self,
        settings: AnimeGamerSettings,
        agents: Mapping[str, str | Path],
        decoders: Mapping[str, ClipDecoder] | None = None,
        decoder_factories: Mapping[str, Callable[[], ClipDecoder]] | None = None,
        decoder_budget_bytes: int | None = None,
        loaded=None,
    ):
        """`settings` as for one film (its agent_path is not used); `agents`: film id -> agent
        checkpoint; `decoders` or `decoder_factories`: film id -> decoder (weights on the CPU or
        the device; the residency manager places them); `decoder_budget_bytes`: device memory
        for the decoders' weights together (None: detected on CUDA, unlimited elsewhere);
        `loaded`: an already built `adapters.LoadedFilms` instead of the files (benchmarks)."""
        if not agents:
            raise BackendError("a multi-film backend needs at least one film")
        self.settings = settings
        self.films = tuple(agents)
        self.agents = dict(agents)
        self._decoders = dict(decoders or {})
        self._factories = dict(decoder_factories or {})
        self.decoder_budget = decoder_budget_bytes
        self.mllm: MultiFilmMLLM | None = None  # once loaded
        self.residency: DecoderResidency[ClipDecoder] | None = None  # once loaded, unless MLLM only
        self._predictors: dict = {}
        self._builder: PromptBuilder | None = None
        self._batcher: MicroBatcher | None = None  # MLLM passes, set at load when max_batch > 1
        self._decode_batcher: MicroBatcher | None = None  # clips, likewise
        self._loaded = loaded

    # -- Backend -------------------------------------------------------------------------------

    def load(self) -> None:
        if self.mllm is not None:
            return
        s = self.settings
        missing = [f for f in self.films if f not in self._decoders and f not in self._factories]
        if missing and not s.mllm_only:
            raise BackendError(f"no clip decoder for film(s) {', '.join(missing)}")
        from inference.mllm.adapters import load_films
        from inference.mllm.instruction import InstructionEncoder
        from inference.mllm.loading import CheckpointError
        from inference.mllm.predict import MLLMPredictor, PredictOptions
        from inference.mllm.prompt import PromptBuilder
        from inference.mllm.tokens import TokenizerMismatch

        t0 = time.perf_counter()
        try:
            loaded = self._loaded or load_films(
                s.mistral_dir, s.tokenizer_dir, self.agents, device=s.device, dtype=s.dtype,
                attn_implementation=s.attn_implementation, rep_dim=s.rep_dim,
            )
        except (CheckpointError, TokenizerMismatch, FileNotFoundError) as e:
            raise BackendError(f"cannot load the AnimeGamer MLLM: {e}") from e
        self._loaded = None
        options = PredictOptions(readout=s.readout, state_pass=s.state_pass, use_cache=s.use_cache)
        self._predictors = {f: MLLMPredictor(loaded.model.view(f), loaded.special, options) for f in self.films}
        self._builder = PromptBuilder(InstructionEncoder(loaded.tokenizer, loaded.special), loaded.special, s.history_window)
        log.info("MLLM with %d film adapters (%s) loaded in %.1f s", len(self.films), ", ".join(self.films), time.perf_counter() - t0)
        if not s.mllm_only:
            self._load_decoders(loaded.model.view(self.films[0]).device)
        self.mllm = loaded.model
        if s.max_batch > 1:
            self._batcher = MicroBatcher(self._predict_with_timings, s.max_batch, s.batch_window)
            if self.residency is not None:
                self._decode_batcher = MicroBatcher(self._decode_films, s.max_batch, s.batch_window)

    def _load_decoders(self, device) -> None:
        import torch

        from inference.decoder.pipeline import compiles, warm_up_compiled
        from inference.decoder.residency import DecoderResidency

        for film, factory in self._factories.items():
            if film not in self._decoders:
                self._decoders[film] = factory()
        for film, d in self._decoders.items():
            if not isinstance(d, ClipDecoder):
                raise BackendError(f"the decoder for {film} ({type(d).__name__}) does not implement ClipDecoder")
        budget = self.decoder_budget
        if budget is None and device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            budget = max(0, free - DECODER_RESERVE_BYTES)
        self.residency = DecoderResidency(self._decoders, device, budget)
        for film, decoder in self._decoders.items():  # compiled presets compile now, on the device, not in a player's turn
            if compiles(decoder):  # (an `exact` decoder is not brought to the device for nothing)
                with self.residency.use(film):
                    warm_up_compiled(decoder, self.settings.max_batch)

    def generate(self, request: TurnRequest, progress: ProgressCallback) -> TurnResult:
        self._require_loaded(request.film_id)
        predict = self._batcher.submit if self._batcher else (lambda r: self._predict_with_timings([r])[0])
        film = request.film_id

        def decode(rep, scope: float, seed: int, progress: ProgressCallback):
            item = (rep, scope, seed, progress)
            if self._decode_batcher is not None:
                result, fps = self._decode_batcher.submit((film, item))
            else:
                [(result, fps)] = self._decode_films([(film, item)])
            frames, timings = outcome(result)
            return frames, fps, timings

        return play_turn(request, progress, predict, None if self.residency is None else decode, self.settings)

    def close(self) -> None:
        """Stop the batching threads, which hold the models; the backend can load() again after."""
        close_all(self._batcher, self._decode_batcher)
        self._batcher = self._decode_batcher = None
        self.mllm = None

    # -- batched decoders -------------------------------------------------------------------------

    def _decode_films(self, items: Sequence[tuple[str, ClipItem]]) -> list[tuple[ClipOutcome, int]]:
        """Clips of several sessions' turns (any films): one batch per film present, each with that
        film's decoder on the device; the seconds spent moving it there go to each of its turns."""
        residency = self.residency
        if residency is None:  # generate decodes through here only once the decoders are loaded
            raise BackendError("this backend has no clip decoders (MLLM only)")
        out: list = [None] * len(items)
        for film, idx in _by_film(f for f, _ in items).items():
            moved, fps = 0.0, DEFAULT_FPS
            try:
                with residency.use(film) as (decoder, moved):
                    fps = clip_fps(decoder)
                    results = decode_together(decoder, [items[i][1] for i in idx])
            except Exception as e:  # noqa: BLE001  (this film's turns fail; the other films' go on)
                results = [(None, {}, e)] * len(idx)
            for i, (frames, timings, error) in zip(idx, results, strict=True):
                out[i] = ((frames, {**timings, "decoder_move": moved}, error), fps)
        return out

    # -- batched MLLM ---------------------------------------------------------------------------

    def predict(self, requests: Sequence[TurnRequest]) -> list[tuple[Prediction, np.ndarray]]:
        """The MLLM part of several sessions' turns (any films): one pass per film present."""
        return [(p, rep) for p, rep, _ in self._predict_with_timings(requests)] if requests else []

    def _predict_with_timings(self, requests: Sequence[TurnRequest]) -> list[tuple[Prediction, np.ndarray, dict]]:
        for r in requests:
            self._require_loaded(r.film_id)
        mllm, builder = self._loaded_parts()
        out: list = [None] * len(requests)
        for film, idx in _by_film(r.film_id for r in requests).items():
            prompts = [builder.build(requests[i].instruction, prompt_history(requests[i])) for i in idx]
            with mllm.lock:
                switch = mllm.use(film)
                outs = self._predictors[film].predict_batch(prompts)
            for i, o in zip(idx, outs, strict=True):
                out[i] = (Prediction.from_sequence(o.values), o.representation, {**o.timings, "adapter_switch": switch})
        return out

    def _loaded_parts(self) -> tuple[MultiFilmMLLM, PromptBuilder]:
        if self.mllm is None or self._builder is None:
            raise BackendError("the animegamer backend is not loaded (call load() first)")
        return self.mllm, self._builder

    def _require_loaded(self, film: str) -> None:
        self._loaded_parts()
        if film not in self._predictors:
            raise BackendError(f"this worker does not serve the film {film!r} (it serves {', '.join(self.films)})")


def _by_film(films: Iterable[str]) -> dict[str, list[int]]:
    """Positions grouped by film, films in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, film in enumerate(films):
        groups.setdefault(film, []).append(i)
    return groups
