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
- offload: one GPU holding one stage's weights at a time (inference.memory.offload): int8 MLLM
  for its pass, then the DiT and the VAE for the denoise, then the VAE alone for the decode, whose
  tiles are the largest that fit the card (`VAE_TILES`); for 12 and 16 GB cards.
- offload_int4: the same with int4 MLLM weights; for 8 GB cards.

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
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any
from unittest.mock import patch

import numpy as np
import torch

from inference.mllm.quantize import int4_on_meta

from .fake_models import build_decoder, build_mllm
from .live import GiB, LiveBytes

MODES = ("resident", "two_gpus", "low_vram", "offload", "offload_int4")  # fastest first
OFFLOAD_MODES = ("offload", "offload_int4")
# The offload modes' VAE tiles (frame height, width), largest first; the plan picks the largest that
# fits. diffusers' tiled decode pads tiles that do not divide 480x720 evenly with its overlap: of
# heights and widths from 80 to 360, only these give whole frames (checked on the meta device,
# tests/memory); 192x288 gives 480x741, 160x240 498x720, 120x180 496x760.
VAE_TILES = ((240, 360), (240, 240))
QUANTIZE = {"low_vram": "int8", "offload": "int8", "offload_int4": "int4"}
SESSIONS = (1, 2, 4)
STAGES = ("weights", "mllm", "denoise", "vae")
# What a CUDA process holds besides tensors: the context (~0.5 GiB on Hopper with CUDA 12/13),
# cuBLAS and cuDNN workspaces, and the allocator's fragmentation over a turn.
OVERHEAD_GIB = 1.5
AUTO_MARGIN_GIB = 0.5  # auto's pick leaves at least this much of the card spare
CARD_SIZES_GB = (8, 12, 16, 24, 40, 48, 80, 141)  # marketed sizes (GB), compared in GiB as drivers report them


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
    weights_decoder: int = 0  # DiT and VAE
    weights_vae: int = 0
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
          stages: Sequence[str] = STAGES, steps: int = 2) -> Trace:
    """Run one turn of `sessions` concurrent sessions on fake tensors on `device` and count it
    (`steps` denoise steps: 2 trace every path of the sampler; a run of 1 holds a little less)."""
    from inference.decoder.vae import decode_latents, uint8_video
    from inference.mllm.predict import MLLMPredictor
    from inference.mllm.tokens import SPECIAL

    cuda = torch.device(device).type == "cuda"
    out = Trace()
    counter = LiveBytes("meta", cuda_rounding=cuda)
    mllm = build_mllm(precision.mllm_dtype, shapes.mllm, shapes.rep_dim, precision.quantize)
    decoder = build_decoder(precision.decoder_dtype, shapes.dit, shapes.vae, shapes.size, precision.low_vram,
                            steps=steps, tiles=precision.vae_tiles)
    with counter, torch.inference_mode():
        out.weights_mllm = counter.adopt([*mllm.parameters(), *mllm.buffers()])
        out.weights_vae = counter.adopt([*decoder.vae.parameters(), *decoder.vae.buffers()])
        out.weights_decoder = out.weights_vae + counter.adopt([*decoder.transformer.parameters(),
                                                               *decoder.transformer.buffers()])
        base, base_reserved = counter.live, counter.reserved
        batch = prompts(shapes, sessions, encoder)
        out.prompt_tokens = len(batch[0])
        with _fused_attention_in_place(), int4_on_meta():
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
    tiles: tuple[int, int] | None = None  # the offload modes' VAE tile (height, width)
    moved_bytes: int = 0  # the offload modes: weights copied host -> device per turn's cycle

    def peak(self, device: str | None = None) -> StagePrediction:
        """The highest stage on one device (default: the fullest device)."""
        names = [device] if device else list(self.devices)
        return max((s for d in names for s in self.devices[d].values()), key=lambda s: s.reserved)

    def need_gib(self) -> float:
        """GiB a card needs for this mode: the fullest device's reserved peak plus the overhead."""
        return self.peak().reserved / GiB + OVERHEAD_GIB

    @property
    def label(self) -> str:
        return self.mode + (f" (VAE tiles {self.tiles[0]}x{self.tiles[1]})" if self.tiles else "")


def tile_key(tiles: tuple[int, int]) -> str:
    return f"tiles {tiles[0]}x{tiles[1]}"


def jobs_for(modes: Sequence[str], tiles: Sequence[tuple[int, int]] = VAE_TILES,
             precision: dict[str, Precision] | None = None) -> list[tuple[str, Precision, tuple[str, ...]]]:
    """The traces `modes` need: (name, precision, stages). The DiT is the same in every mode: its
    denoise stage is traced once, in "full"; the int8/int4 traces give the MLLM's; each offload
    tile size its VAE decode."""
    gpu = {"full": Precision(), "int8": Precision(quantize="int8", low_vram=True),
           "int4": Precision(quantize="int4", low_vram=True)}
    gpu.update(precision or {})
    whole = "resident" in modes or "two_gpus" in modes
    jobs: list[tuple[str, Precision, tuple[str, ...]]] = [("full", gpu["full"], STAGES if whole else ("denoise",))]
    if "low_vram" in modes or "offload" in modes:
        jobs.append(("int8", gpu["int8"], ("mllm", "vae") if "low_vram" in modes else ("mllm",)))
    if "offload_int4" in modes:
        jobs.append(("int4", gpu["int4"], ("mllm",)))
    if any(m in OFFLOAD_MODES for m in modes):
        jobs += [(tile_key(t), replace(gpu["full"], low_vram=True, vae_tiles=t), ("vae",)) for t in tiles]
    return jobs


def predict(shapes: Shapes | None = None, sessions: Sequence[int] = SESSIONS, modes: Sequence[str] = MODES,
            device: str = "cuda", precision: dict[str, Precision] | None = None,
            processes: int | None = None, tiles: Sequence[tuple[int, int]] = VAE_TILES) -> list[Prediction]:
    """Every mode at every number of sessions (the offload modes once per VAE tile size, largest
    first). The traces run in two processes where two cores are free (the tracing is
    single-threaded Python); `inference.memory.cache` keeps the answer on disk."""
    shapes = shapes or Shapes.full_size()
    jobs = jobs_for(modes, tiles, precision)
    processes = min(len(jobs), processes if processes is not None else (os.cpu_count() or 1))
    if processes > 1:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked torch state
        with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context) as pool:
            futures = [pool.submit(_trace_each, shapes, p, tuple(sessions), device, st) for _, p, st in jobs]
            results = [f.result() for f in futures]
    else:
        results = [_trace_each(shapes, p, tuple(sessions), device, st) for _, p, st in jobs]
    out = []
    for mode in modes:
        for n in sessions:
            traces = {name: per_n[n] for (name, _, _), per_n in zip(jobs, results, strict=True)}
            for t in (tiles if mode in OFFLOAD_MODES else (None,)):
                out.append(compose(mode, n, traces, t))
    return out


def _trace_each(shapes: Shapes, precision: Precision, sessions: tuple[int, ...], device: str,
                stages: Sequence[str]) -> dict[int, Trace]:
    return {n: trace(shapes, precision, n, device, stages=stages) for n in sessions}


def compose(mode: str, sessions: int, traces: Trace | dict[str, Trace], tiles: tuple[int, int] | None = None) -> Prediction:
    """Add each stage's activations to the weights resident on its device in `mode`. `traces`: by
    `jobs_for`'s names (one Trace: every part from it, as a run traced in its own precision)."""
    if isinstance(traces, Trace):
        one = traces
        full = quant = vae = one
    else:
        full = traces["full"]
        quant = traces.get(QUANTIZE.get(mode, "full"), full)
        vae = traces.get(tile_key(tiles), quant) if tiles else (quant if mode == "low_vram" else full)

    def stage(weights: int, t: Trace, s: str) -> dict[str, StagePrediction]:
        if s not in t.activations:
            return {}
        return {s: StagePrediction(weights + t.activations[s], weights + t.reserved[s])}

    def weights(w: int) -> dict[str, StagePrediction]:
        return {"weights": StagePrediction(w, w)}

    if mode == "two_gpus":
        devices = {"gpu0": weights(full.weights_mllm) | stage(full.weights_mllm, full, "mllm"),
                   "gpu1": weights(full.weights_decoder) | stage(full.weights_decoder, full, "denoise")
                   | stage(full.weights_decoder, full, "vae")}
    elif mode in OFFLOAD_MODES:  # one stage's weights at a time (the VAE's come with the DiT's)
        held = max(quant.weights_mllm, full.weights_decoder)
        devices = {"gpu0": weights(held) | stage(quant.weights_mllm, quant, "mllm")
                   | stage(full.weights_decoder, full, "denoise") | stage(full.weights_vae, vae, "vae")}
    else:
        w = quant.weights_mllm + full.weights_decoder
        devices = {"gpu0": weights(w) | stage(w, quant, "mllm") | stage(w, full, "denoise") | stage(w, vae, "vae")}
    if mode in OFFLOAD_MODES:
        return Prediction(mode, sessions, devices, tiles, quant.weights_mllm + full.weights_decoder)
    return Prediction(mode, sessions, devices)


def table(predictions: Sequence[Prediction]) -> str:
    """Markdown: per mode and sessions, GiB allocated / reserved per stage, and the card each needs.
    The offload modes' "weights" is the most weights the GPU holds at once."""
    head = "| mode | sessions | device | weights | MLLM | denoise | VAE | needs (reserved + overhead) |"
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for p in predictions:
        for dev, stages in p.devices.items():
            cells = []
            for s in STAGES:
                st = stages.get(s)
                cells.append("—" if st is None else f"{st.allocated / GiB:.2f} / {st.reserved / GiB:.2f}")
            need = p.peak(dev).reserved / GiB + OVERHEAD_GIB
            lines.append(f"| {p.label} | {p.sessions} | {dev} | " + " | ".join(cells) + f" | {need:.1f} GiB |")
    return "\n".join(lines)


def fit_table(predictions: Sequence[Prediction], cards_gb: Sequence[int] = CARD_SIZES_GB) -> str:
    """Markdown: which modes fit which card size (the offload modes with the largest VAE tile that
    fits), with the headroom at 1 session; "auto" is the fastest that fits."""
    modes = sorted({p.mode for p in predictions}, key=MODES.index)
    head = "| card | usable GiB | " + " | ".join(modes) + " | auto picks (1 session) |"
    lines = [head, "|" + " --- |" * (len(modes) + 3)]
    for gb in cards_gb:
        gib = usable_gib(gb)
        cells = []
        for m in modes:
            fitting = [p for p in predictions if p.mode == m and p.need_gib() <= gib]
            one = [p for p in fitting if p.sessions == 1]
            cells.append(f"up to {max(p.sessions for p in fitting)} sessions ({gib - one[0].need_gib():.1f} GiB spare at 1"
                         + (f", tiles {one[0].tiles[0]}x{one[0].tiles[1]}" if one and one[0].tiles else "") + ")"
                         if one else "no")
        pick = choose([gib], 1, predictions, single_gpu=True)
        lines.append(f"| {gb} GB | {gib:.1f} | " + " | ".join(cells) + f" | {pick.label if pick.fits else 'none'} |")
    return "\n".join(lines)


def usable_gib(card_gb: float) -> float:
    """A card sold as N GB reports about N * 10^9 bytes minus ECC/driver reservations: in GiB."""
    return card_gb * 1e9 / GiB * 0.98


@dataclass(frozen=True)
class Advice:
    fits: bool
    mode: str
    message: str
    tiles: tuple[int, int] | None = None  # the offload modes' VAE tile
    need_gib: float = 0.0
    spare_gib: float = 0.0

    @property
    def label(self) -> str:
        return self.mode + (f" (VAE tiles {self.tiles[0]}x{self.tiles[1]})" if self.tiles else "")


def _headroom(p: Prediction, gpu_gib: Sequence[float]) -> float | None:
    """GiB left on the tightest GPU; None when the mode is not possible here."""
    if p.mode == "two_gpus":
        if len(gpu_gib) < 2:
            return None
        a, b = sorted(gpu_gib, reverse=True)[:2]
        n0, n1 = (p.peak(d).reserved / GiB + OVERHEAD_GIB for d in ("gpu0", "gpu1"))
        return min(a - n0, b - n1)
    return max(gpu_gib) - p.need_gib()


def _best(preds: Sequence[Prediction], mode: str, sessions: int, gpu_gib: Sequence[float]) -> tuple[Prediction, float | None] | None:
    """The mode's prediction at `sessions` on these GPUs: the first (largest VAE tile) that fits,
    else the smallest; with its headroom."""
    mine = [p for p in preds if p.mode == mode and p.sessions == sessions]
    if not mine:
        return None
    for p in mine:
        h = _headroom(p, gpu_gib)
        if h is not None and h >= 0:
            return p, h
    p = min(mine, key=lambda q: q.need_gib())
    return p, _headroom(p, gpu_gib)


# What a mode's pick says besides its fit: what is known to cost quality (docs/performance.md).
CAVEATS = {
    "offload_int4": "4-bit MLLM weights: on random weights at full size they move the prediction far more than "
                    "int8 (bench/int4.py); on the released weights not measured yet (bench/int4.py --weights)",
}


def _caveat(mode: str) -> str:
    return f"; note: {CAVEATS[mode]}" if mode in CAVEATS else ""


def choose(gpu_gib: Sequence[float], sessions: int, predictions: Sequence[Prediction], single_gpu: bool = False) -> Advice:
    """ANIMEGAMER_MEMORY_MODE=auto: the fastest mode (MODES' order) that fits with AUTO_MARGIN_GIB
    to spare, and why (a desktop, the driver or another process may take a little of the card)."""
    cards = " + ".join(f"{g:.1f}" for g in gpu_gib) + " GiB"
    for m in MODES:
        if single_gpu and m == "two_gpus":
            continue
        found = _best(predictions, m, sessions, [g - AUTO_MARGIN_GIB for g in gpu_gib])
        if found and found[1] is not None and found[1] >= 0:
            p, spare = found[0], found[1] + AUTO_MARGIN_GIB
            slower = [f"{q} does not fit with {AUTO_MARGIN_GIB} GiB to spare" for q in MODES[:MODES.index(m)] if not (single_gpu and q == "two_gpus")]
            return Advice(True, m, f"auto: {p.label}, the fastest mode that fits {cards} at {sessions} session(s): needs "
                          f"{p.need_gib():.1f} GiB (predicted), {spare:.1f} GiB spare"
                          + (f" ({', '.join(slower)})" if slower else "") + _caveat(m), p.tiles, p.need_gib(), spare)
    smallest = min((p for p in predictions if p.sessions == sessions), key=lambda p: p.need_gib())
    return Advice(False, smallest.mode, f"auto: no mode fits {cards} at {sessions} session(s): {smallest.label}, the "
                  f"smallest, needs {smallest.need_gib():.1f} GiB", smallest.tiles, smallest.need_gib(),
                  max(gpu_gib) - smallest.need_gib())


HOW = {"resident": "ANIMEGAMER_MEMORY_MODE=resident",
       "two_gpus": "ANIMEGAMER_MLLM_DEVICE=cuda:0 ANIMEGAMER_DECODER_DEVICE=cuda:1",
       "low_vram": "ANIMEGAMER_MEMORY_MODE=low_vram", "offload": "ANIMEGAMER_MEMORY_MODE=offload",
       "offload_int4": "ANIMEGAMER_MEMORY_MODE=offload_int4"}


def advise(gpu_gib: Sequence[float], mode: str, sessions: int = 1, predictions: Sequence[Prediction] | None = None) -> Advice:
    """Whether `mode` ("auto": the fastest that fits) fits these GPUs (total GiB each) at
    `sessions`, which mode would, with the headroom."""
    preds = list(predictions) if predictions is not None else predict(sessions=(sessions,))
    if mode == "auto":
        return choose(gpu_gib, sessions, preds)
    found = _best(preds, mode, sessions, gpu_gib)
    if found is None:
        raise ValueError(f"no prediction for {mode} at {sessions} session(s)")
    p, own = found
    cards = " + ".join(f"{g:.1f}" for g in gpu_gib) + " GiB"
    need = p.need_gib()
    if own is not None and own >= 0:
        return Advice(True, mode, f"{p.label} fits {cards} at {sessions} session(s): needs {need:.1f} GiB "
                                  f"(predicted), {own:.1f} GiB spare{_caveat(mode)}", p.tiles, need, own)
    why = (f"{mode} needs two GPUs; found {len(gpu_gib)}" if own is None else
           f"{mode} needs {need:.1f} GiB at {sessions} session(s) (predicted), more than {cards}")
    best = choose(gpu_gib, sessions, preds)
    if not best.fits:
        return Advice(False, mode, f"{why}; no mode fits: {best.message.split(': ', 2)[-1]}", p.tiles, need, own or 0.0)
    return Advice(False, best.mode, f"{why}; {best.label} fits ({best.spare_gib:.1f} GiB spare): set {HOW[best.mode]} "
                                    "or ANIMEGAMER_MEMORY_MODE=auto", best.tiles, best.need_gib, best.spare_gib)


__all__ = ["MODES", "Precision", "Prediction", "Shapes", "Trace", "advise", "choose", "compose", "fit_table", "predict",
           "replace", "table", "trace"]
