"""A whole turn's memory per stage, predicted by running the real model code on fake tensors.

Each stage runs the worker's own code at full size under a FakeTensorMode, counted by
`live.LiveBytes` (every output storage, freed when Python frees it; the CUDA allocator's 512-byte
blocks and 2 MiB large segments):

- weights: the models as a worker holds them (Mistral with the LoRA merged, bf16 or torchao int8;
  the DiT and the VAE in fp16);
- mllm: `MLLMPredictor.forward` on B prompts of the history window's length (prefill, KV cache,
  the four state steps, the output projection);
- denoise: `AnimeGamerDecoder.sample_latents` (B sessions x 2 guidance branches per DiT forward);
  2 steps trace every path of the sampler, and more steps repeat them without holding more;
- vae: `decode_latents` and the uint8 frames, untiled or sliced and tiled as the mode sets.

Each stage's activations (its peak above the weights) are traced once per batch size and model
precision, then added to the weights resident on each device in each memory mode:

- resident: one GPU holds the bf16 MLLM, the DiT and the VAE;
- two_gpus: the MLLM on one GPU, the decoder on the other (each device's peak);
- low_vram: one GPU, int8 MLLM weights, VAE sliced and tiled.

The trace runs on the meta device (shapes and sizes, no data). Attention runs as a fused kernel
on both targets (flash / memory-efficient on CUDA, flash on the CPU), holding no score matrix; the
meta device would take SDPA's math path, so `_fused_attention` stands in with the kernel's outputs. Not counted: the CUDA context and
library workspaces (cuBLAS, cuDNN) and the allocator's fragmentation: `OVERHEAD_GIB` and the
reserved rounding cover them in `fits`.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any
from unittest.mock import patch

import numpy as np
import torch

from .fake_models import build_decoder, build_mllm
from .live import GiB, LiveBytes

MODES = ("resident", "two_gpus", "low_vram")
SESSIONS = (1, 2, 4)
STAGES = ("weights", "mllm", "denoise", "vae")
# What a CUDA process holds besides tensors: the context (~0.5 GiB on Hopper with CUDA 12/13),
# cuBLAS and cuDNN workspaces, and the allocator's fragmentation over a turn.
OVERHEAD_GIB = 1.5
CARD_SIZES_GB = (24, 40, 48, 80, 141)  # marketed sizes (GB), compared in GiB as drivers report them


@dataclass(frozen=True)
class Shapes:
    """What is traced: the released sizes unless a test asks for tiny ones."""

    mllm: dict[str, Any]  # MistralConfig fields
    dit: dict[str, Any]
    vae: dict[str, Any]
    size: dict[str, int]  # frame height, width
    rep_dim: int = 1920
    history: int = 2  # the default ANIMEGAMER_HISTORY_WINDOW
    instruction_tokens: int = 24  # a typical instruction; the bench passes its own prompt's

    @classmethod
    def full_size(cls, **kw) -> Shapes:
        from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG
        from inference.decoder.vae import COGVIDEOX_VAE_CONFIG
        from inference.mllm.model import MISTRAL_7B_SHAPE

        return cls(dict(MISTRAL_7B_SHAPE), dict(ANIMEGAMER_2B_CONFIG), dict(COGVIDEOX_VAE_CONFIG),
                   {"height": 480, "width": 720}, **kw)


@dataclass(frozen=True)
class Precision:
    """How the worker holds the models (the GPU's: bf16 MLLM, fp16 decoder; a CPU run uses bf16)."""

    mllm_dtype: torch.dtype = torch.bfloat16
    decoder_dtype: torch.dtype = torch.float16
    quantize: str | None = None  # "int8" in low_vram
    low_vram: bool = False  # VAE tiled
    vae_tiles: tuple[int, int] | None = None  # (height, width) of the VAE's tiles if not diffusers' default


@dataclass
class Trace:
    """One traced configuration: weights and each stage's activations (bytes above the weights)."""

    weights_mllm: int = 0
    weights_decoder: int = 0
    activations: dict[str, int] = field(default_factory=dict)  # stage -> allocated bytes
    reserved: dict[str, int] = field(default_factory=dict)  # stage -> with segment rounding
    largest: dict[str, tuple[int, tuple, str]] = field(default_factory=dict)  # stage -> (bytes, shape, dtype)
    prompt_tokens: int = 0


def _fused_attention(query, key, value, *args, **kwargs):
    """SDPA as a fused kernel (CUDA flash / memory-efficient, the CPU's flash) allocates it: the
    output and the log-sum-exp (fp32, B x H x L), no L x L score matrix."""
    lse = torch.empty(query.shape[:-1], dtype=torch.float32, device=query.device)
    out = torch.empty((*query.shape[:-1], value.shape[-1]), dtype=query.dtype, device=query.device)
    del lse  # freed when the kernel returns (held alongside the output until then)
    return out


@contextmanager
def _fused_attention_in_place():
    """transformers and diffusers look SDPA up on torch.nn.functional at each call."""
    with patch.object(torch.nn.functional, "scaled_dot_product_attention", _fused_attention):
        yield


class _FixedLengthEncoder:
    """An instruction of n ordinary tokens: the prompt's length is what memory depends on."""

    def __init__(self, n: int):
        self.n = n

    def encode(self, text: str) -> list[int]:
        return [29000] * self.n  # an ordinary Mistral piece id (below the AnimeGamer tokens)


def prompts(shapes: Shapes, sessions: int, encoder=None):
    """`sessions` prompts with `shapes.history` earlier turns each, built by the real PromptBuilder."""
    from inference.mllm.prompt import HistoryItem, PromptBuilder
    from inference.mllm.tokens import SPECIAL

    builder = PromptBuilder(encoder or _FixedLengthEncoder(shapes.instruction_tokens), SPECIAL, shapes.history)
    rep = np.zeros((226, shapes.rep_dim), np.float32)
    history = [HistoryItem("-", (1, 0, 0, 0), rep) for _ in range(shapes.history)]
    return [builder.build("-", history) for _ in range(sessions)]


def trace(shapes: Shapes, precision: Precision, sessions: int, device: str = "cuda", encoder=None,
          stages: Sequence[str] = STAGES) -> Trace:
    """Run one turn of `sessions` concurrent sessions on fake tensors on `device` and count it."""
    from inference.decoder.vae import decode_latents, uint8_video
    from inference.mllm.predict import MLLMPredictor
    from inference.mllm.tokens import SPECIAL

    cuda = torch.device(device).type == "cuda"
    out = Trace()
    counter = LiveBytes("meta", cuda_rounding=cuda)
    mllm = build_mllm(precision.mllm_dtype, shapes.mllm, shapes.rep_dim, precision.quantize)
    decoder = build_decoder(precision.decoder_dtype, shapes.dit, shapes.vae, shapes.size, precision.low_vram,
                            tiles=precision.vae_tiles)
    with counter, torch.inference_mode():
        out.weights_mllm = counter.adopt([*mllm.parameters(), *mllm.buffers()])
        out.weights_decoder = counter.adopt([*decoder.transformer.parameters(), *decoder.transformer.buffers(),
                                             *decoder.vae.parameters(), *decoder.vae.buffers()])
        base, base_reserved = counter.live, counter.reserved
        batch = prompts(shapes, sessions, encoder)
        out.prompt_tokens = len(batch[0])
        with _fused_attention_in_place():
            if "mllm" in stages:
                with counter.stage("mllm"):
                    reps, _, _, _ = MLLMPredictor(mllm, SPECIAL).forward(batch)
                    del reps
            rep = torch.zeros((sessions, *decoder.context_shape), device="meta")
            if "denoise" in stages:
                with counter.stage("denoise"):
                    latents = decoder.sample_latents(rep, [10.0] * sessions, _FakeNoise(decoder, sessions))
            else:  # what the sampler returns
                latents = torch.empty((sessions, *decoder.latent_shape), dtype=torch.float32, device="meta")
            if "vae" in stages:
                with counter.stage("vae"):
                    frames = uint8_video(decode_latents(decoder.vae, latents.to(decoder.vae.device)))
                    del frames
    for s in counter.stages:
        out.activations[s.name] = s.peak - base
        out.reserved[s.name] = s.reserved_peak - base_reserved
        out.largest[s.name] = (s.largest, s.largest_shape, s.largest_dtype)
    return out


class _FakeNoise:
    """The sampler's draws, made where the latents live (the real SeededNoise draws on the CPU and
    moves them: the same bytes on the device)."""

    def __init__(self, decoder, sessions: int):
        self.shape = (sessions, *decoder.latent_shape)
        self.device = decoder.device

    def draw(self) -> torch.Tensor:
        return torch.empty(self.shape, dtype=torch.float32, device=self.device)


# -- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StagePrediction:
    allocated: int  # bytes on the device at the stage's peak (weights included)
    reserved: int  # with the allocator's segment rounding


@dataclass(frozen=True)
class Prediction:
    mode: str
    sessions: int
    devices: dict[str, dict[str, StagePrediction]]  # "gpu0"/"gpu1" -> stage -> prediction

    def peak(self, device: str | None = None) -> StagePrediction:
        """The highest stage on one device (default: the fullest device)."""
        names = [device] if device else list(self.devices)
        return max((s for d in names for s in self.devices[d].values()), key=lambda s: s.reserved)

    def need_gib(self) -> float:
        """GiB a card needs for this mode: the fullest device's reserved peak plus the overhead."""
        return self.peak().reserved / GiB + OVERHEAD_GIB


def predict(shapes: Shapes | None = None, sessions: Sequence[int] = SESSIONS, modes: Sequence[str] = MODES,
            device: str = "cuda", precision: dict[str, Precision] | None = None,
            processes: int | None = None) -> list[Prediction]:
    """Every mode at every number of sessions. The full-precision and the low_vram traces run in
    two processes where two cores are free (the tracing is single-threaded Python): about 40 s for
    all modes at 1, 2 and 4 sessions at full size on two cores."""
    shapes = shapes or Shapes.full_size()
    gpu = {"full": Precision(), "low_vram": Precision(quantize="int8", low_vram=True)}
    gpu.update(precision or {})
    full = "resident" in modes or "two_gpus" in modes
    jobs = []
    if full:
        jobs.append(("full", gpu["full"], STAGES))
    if "low_vram" in modes:
        # The DiT is the same in every mode: its denoise stage is traced once (unless alone).
        jobs.append(("low_vram", gpu["low_vram"], ("mllm", "vae") if full else STAGES))
    processes = min(len(jobs), processes if processes is not None else (os.cpu_count() or 1))
    if processes > 1:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked torch state
        with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context) as pool:
            futures = [pool.submit(_trace_each, shapes, p, tuple(sessions), device, st) for _, p, st in jobs]
            results = [f.result() for f in futures]
    else:
        results = [_trace_each(shapes, p, tuple(sessions), device, st) for _, p, st in jobs]
    traces = {(kind, n): t for (kind, _, _), per_n in zip(jobs, results, strict=True) for n, t in per_n.items()}
    for n in sessions:
        if full and ("low_vram", n) in traces:
            low, whole = traces["low_vram", n], traces["full", n]
            low.activations["denoise"] = whole.activations["denoise"]
            low.reserved["denoise"] = whole.reserved["denoise"]
            low.largest["denoise"] = whole.largest["denoise"]
    return [compose(mode, n, traces["low_vram" if mode == "low_vram" else "full", n]) for mode in modes for n in sessions]


def _trace_each(shapes: Shapes, precision: Precision, sessions: tuple[int, ...], device: str,
                stages: Sequence[str]) -> dict[int, Trace]:
    return {n: trace(shapes, precision, n, device, stages=stages) for n in sessions}


def compose(mode: str, sessions: int, t: Trace) -> Prediction:
    """Add each stage's activations to the weights resident on its device in `mode`."""

    def stages(weights: int, which: Sequence[str]) -> dict[str, StagePrediction]:
        out = {"weights": StagePrediction(weights, weights)}
        for s in which:
            if s in t.activations:
                out[s] = StagePrediction(weights + t.activations[s], weights + t.reserved[s])
        return out

    if mode == "two_gpus":
        devices = {"gpu0": stages(t.weights_mllm, ["mllm"]), "gpu1": stages(t.weights_decoder, ["denoise", "vae"])}
    else:
        devices = {"gpu0": stages(t.weights_mllm + t.weights_decoder, ["mllm", "denoise", "vae"])}
    return Prediction(mode, sessions, devices)


def table(predictions: Sequence[Prediction]) -> str:
    """Markdown: per mode and sessions, GiB allocated / reserved per stage, and the card each needs."""
    head = "| mode | sessions | device | weights | MLLM | denoise | VAE | needs (reserved + overhead) |"
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for p in predictions:
        for dev, stages in p.devices.items():
            cells = []
            for s in STAGES:
                st = stages.get(s)
                cells.append("—" if st is None else f"{st.allocated / GiB:.2f} / {st.reserved / GiB:.2f}")
            need = p.peak(dev).reserved / GiB + OVERHEAD_GIB
            lines.append(f"| {p.mode} | {p.sessions} | {dev} | " + " | ".join(cells) + f" | {need:.1f} GiB |")
    return "\n".join(lines)


def fit_table(predictions: Sequence[Prediction], cards_gb: Sequence[int] = CARD_SIZES_GB) -> str:
    """Markdown: which modes fit which card size, with the headroom."""
    modes = sorted({p.mode for p in predictions}, key=MODES.index)
    head = "| card | " + " | ".join(modes) + " |"
    lines = [head, "|" + " --- |" * (len(modes) + 1)]
    for gb in cards_gb:
        gib = usable_gib(gb)
        cells = []
        for m in modes:
            fitting = [p for p in predictions if p.mode == m and p.need_gib() <= gib]
            cells.append(f"up to {max(p.sessions for p in fitting)} sessions ({gib - min(p.need_gib() for p in fitting):.1f} GiB spare at 1)"
                         if fitting else "no")
        lines.append(f"| {gb} GB | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def usable_gib(card_gb: float) -> float:
    """A card sold as N GB reports about N * 10^9 bytes minus ECC/driver reservations: in GiB."""
    return card_gb * 1e9 / GiB * 0.98


@dataclass(frozen=True)
class Advice:
    fits: bool
    mode: str
    message: str


def advise(gpu_gib: Sequence[float], mode: str, sessions: int = 1, predictions: Sequence[Prediction] | None = None) -> Advice:
    """Whether `mode` fits these GPUs (total GiB each) at `sessions`, which mode would, with the headroom."""
    preds = list(predictions) if predictions is not None else predict(sessions=(sessions,))
    by = {(p.mode, p.sessions): p for p in preds}
    if (mode, sessions) not in by:
        raise ValueError(f"no prediction for {mode} at {sessions} session(s)")

    def headroom(m: str) -> float | None:
        """GiB left on the tightest GPU; None when not predicted or not possible here."""
        p = by.get((m, sessions))
        if p is None or (m == "two_gpus" and len(gpu_gib) < 2):
            return None
        if m == "two_gpus":
            a, b = sorted(gpu_gib, reverse=True)[:2]
            n0, n1 = (p.peak(d).reserved / GiB + OVERHEAD_GIB for d in ("gpu0", "gpu1"))
            return min(a - n0, b - n1)
        return max(gpu_gib) - p.need_gib()

    cards = " + ".join(f"{g:.1f}" for g in gpu_gib) + " GiB"
    need = by[mode, sessions].need_gib()
    own = headroom(mode)
    if own is not None and own >= 0:
        return Advice(True, mode, f"{mode} fits {cards} at {sessions} session(s): needs {need:.1f} GiB "
                                  f"(predicted), {own:.1f} GiB spare")
    why = (f"{mode} needs two GPUs; found {len(gpu_gib)}" if own is None else
           f"{mode} needs {need:.1f} GiB at {sessions} session(s) (predicted), more than {cards}")
    fitting = [(m, h) for m in MODES if (h := headroom(m)) is not None and h >= 0]
    if not fitting:
        smallest = min((p for p in preds if p.sessions == sessions), key=lambda p: p.need_gib())
        return Advice(False, mode, f"{why}; no mode fits: {smallest.mode}, the smallest, needs "
                                   f"{smallest.need_gib():.1f} GiB")
    best, spare = fitting[0]
    how = {"resident": "ANIMEGAMER_MEMORY_MODE=resident",
           "two_gpus": "ANIMEGAMER_MLLM_DEVICE=cuda:0 ANIMEGAMER_DECODER_DEVICE=cuda:1",
           "low_vram": "ANIMEGAMER_MEMORY_MODE=low_vram"}[best]
    return Advice(False, best, f"{why}; {best} fits ({spare:.1f} GiB spare): set {how}")


def timed_predict(**kw) -> tuple[list[Prediction], float]:
    t = time.perf_counter()
    preds = predict(**kw)
    return preds, time.perf_counter() - t


__all__ = ["MODES", "Precision", "Prediction", "Shapes", "Trace", "advise", "compose", "fit_table", "predict",
           "replace", "table", "trace"]
