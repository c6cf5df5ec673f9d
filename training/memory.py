"""Peak GPU memory of one training step, per phase, and the settings that fit a card.

Tracing a training step on the meta device, as inference/memory/plan.py traces a turn, would need
fake tensors through peft, accelerate and the optimizers; this is an analytic model instead, with
each term counted from the phase's real modules built on the meta device (parameter counts) and
checked against measured CPU steps (bench/train_memory.py: full width at 1 and 2 layers, within
0.2 %; tests/training/test_memory.py: the tiny models), with the live storage counter
inference/memory/live.py uses:

    weights      frozen parameters x bytes per parameter (bf16 2, int8 1, int4 ~0.53, fp32 4)
    trainable    fp32 masters + fp32 gradients: 8 bytes per trainable parameter (the gradients are
                 held through the micro-steps of gradient accumulation)
    optimizer    adamw 8 bytes per trainable parameter (two fp32 moments), adamw8bit ~2.03
                 (two int8 moments and a scale per 256), cpu_offload 0 (states in host memory)
    activations  what each layer keeps for its backward, per token, by architecture (`Block`:
                 Mistral's layer, CogVideoX's block; the LoRA dropout's output and mask apart), or
                 with gradient checkpointing each layer's input and one layer recomputed; at the
                 largest of the end of the forward, the start of the backward (the head's gradient
                 computed whole, phase (b): 32,284 x 4096 in fp32) and the last layer's backward;
                 an int8 base's matmuls keep each layer's weights dequantized for the backward
    fixed        the 4D mask, the scored logits in fp32, the sample's tensors

The optimizer step runs after the activations are freed: its peak (weights, trainable, states and
the update's temporaries: one fp32 copy of every trainable parameter for CUDA's foreach update)
is compared with the backward's and the larger one counts. A card of N GB offers `usable_gib(N)`
(inference.memory.plan) less the CUDA context and kernels' workspaces (CUDA_OVERHEAD_GIB);
predictions carry a 10 % margin for the allocator's fragmentation.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from inference.memory.plan import usable_gib
from training.config import RunConfig

GiB = 2**30
CARDS_GB = (8, 12, 16, 24, 48, 80)
CUDA_OVERHEAD_GIB = 0.75  # CUDA context, cuBLAS/cuDNN workspaces: outside torch's allocator
MARGIN = 1.10  # fragmentation of the caching allocator

WEIGHT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "int8": 1.0, "int4": 0.53}
STATE_BYTES = {"adamw": 8.0, "adamw8bit": 2.0 + 8.0 / 256, "cpu_offload": 0.0}


@dataclass(frozen=True)
class Block:
    """One transformer layer's activations per token, in elements of the compute dtype, as counted
    on the real layer (the tensors autograd saves, bench/train_memory.py) and checked against a
    measured step at full width (docs/training.md):

    saved       what the layer keeps for its backward: saved_width x width + saved_ffn x ffn
                + saved_kv x kv_width + saved_heads x heads (+ the LoRA dropout's copies, counted
                apart from `lora_inputs`)
    transient   what the backward of the last layer adds at the step's peak, beyond what it saved
    checkpoint  what a checkpointed layer keeps: its inputs
    outside     what the model keeps outside its layers at the start of the backward (the final norm)"""

    saved_width: float
    saved_ffn: float
    transient_ffn: float
    checkpoint_width: float
    saved_kv: float = 0.0
    saved_heads: float = 0.0
    outside_width: float = 0.0


# Mistral's decoder layer (phase (b)): the two RMSNorms keep their input, normed value and output
# (6 widths) and a 1/rms per token each; attention keeps q, the repeated k and v, the output and
# its transposed copy (4 widths), k before the repeat (one kv width) and a log-sum-exp per head;
# the MLP keeps gate, SiLU(gate) and up (3 ffn); each LoRA keeps its rank-wide A output. The final
# RMSNorm keeps three widths and the output resampler's input one more when the backward begins.
MISTRAL = Block(saved_width=8.0, saved_ffn=3.0, transient_ffn=2.0, checkpoint_width=1.0, saved_kv=1.0,
                saved_heads=1.0, outside_width=4.0)
# CogVideoX's block (phases (a) and (c)): norm1 and norm2 keep input and normed value (4 widths),
# attention the joint normed input, q and k before and after their norms, v, the output and the
# projected output (9 widths); the MLP its normed input (a width) and the GELU's input (one ffn).
# The backward of the MLP holds two ffn-wide gradients at the peak.
DIT = Block(saved_width=13.0, saved_ffn=1.0, transient_ffn=2.0, checkpoint_width=1.0)
BLOCKS = {"a": DIT, "b": MISTRAL, "c": DIT}


@dataclass(frozen=True)
class PhaseShape:
    """What the memory model needs of a phase, at its configured sizes (the phases' recipe
    modules fill one: `phase_shape(run, phase_table)`)."""

    phase: str
    frozen: int  # frozen parameters
    trainable: int  # trainable parameters (fp32 masters)
    tokens: int  # tokens of one sample through the transformer
    width: int  # transformer width
    layers: int
    ffn: int  # MLP hidden width
    frozen_dtype: str = "bf16"  # one of WEIGHT_BYTES
    compute_bytes: int = 2  # bf16/fp16 activations (4 for fp32)
    lora_inputs: int = 0  # per layer: summed input widths of the LoRA-wrapped linears with dropout
    logits: int = 0  # logits elements per sample kept in fp32
    fixed_bytes: int = 0  # anything else held through the step (a frozen encoder, buffers)
    sample_bytes: int = 0  # one sample's input tensors
    kv_width: int = 0  # key/value heads x head width (grouped-query attention)
    heads: int = 0
    lora_outputs: int = 0  # per layer: summed ranks of the LoRA-wrapped linears (their A outputs)
    mask: bool = False  # a 4D attention mask (tokens x tokens, compute dtype) shared by the layers
    largest_trainable: int = 0  # elements of the largest trainable tensor (its gradient, whole, in flight)
    forward_bytes: int = 0  # per sample: tensors alive in the forward only (a condition drop's copies)
    dequantized: int = 0  # per layer: quantized weights autograd keeps dequantized (compute dtype) for the backward


@dataclass(frozen=True)
class Peak:
    """A prediction in bytes, by term."""

    weights: int
    trainable: int
    optimizer: int
    activations: int
    step_extra: int  # the optimizer step's temporaries (counted only if its peak is the higher)

    @property
    def backward_peak(self) -> int:
        return self.weights + self.trainable + self.optimizer + self.activations

    @property
    def step_peak(self) -> int:
        return self.weights + self.trainable + self.optimizer + self.step_extra

    @property
    def total(self) -> int:
        return max(self.backward_peak, self.step_peak)

    def need_gib(self) -> float:
        """What a card must offer: the peak with the margin, and the CUDA overhead."""
        return self.total * MARGIN / GiB + CUDA_OVERHEAD_GIB


def activation_bytes(shape: PhaseShape, batch: int, checkpointing: bool, device: str = "cuda") -> int:
    """The forward and backward's peak above the weights, gradients and states (module docstring).
    `device`: dropout keeps a bool mask on CUDA, a mask in the compute dtype on the CPU."""
    block = BLOCKS[shape.phase]
    b = shape.compute_bytes
    tokens = shape.tokens * batch
    mask_bytes = 1 if device == "cuda" else b
    saved = (b * (block.saved_width * shape.width + block.saved_ffn * shape.ffn + block.saved_kv * shape.kv_width
                  + block.saved_heads * shape.heads + shape.lora_outputs)
             + (b + mask_bytes) * shape.lora_inputs)  # the LoRA dropout's output and its mask
    transient = b * block.transient_ffn * shape.ffn
    kept = b * block.checkpoint_width * shape.width  # a checkpointed layer's input
    weights = b * shape.dequantized  # a layer's int8 weights, dequantized and saved by its matmuls
    if checkpointing:
        # the head's gradient comes first, over the layers' inputs; then the last layer is
        # recomputed (its input now inside its saved tensors) and its backward runs
        head, last = shape.layers * kept, (shape.layers - 1) * kept + saved + transient
        head_fixed, last_fixed = 0, weights
    else:
        head, last = shape.layers * saved, shape.layers * saved + transient
        head_fixed = last_fixed = shape.layers * weights
    # The head's gradient (phase (b): the grown vocabulary x width, fp32) is computed whole before it
    # is added into the held one, while every layer's activations are alive.
    outside = b * block.outside_width * shape.width
    end_of_forward = tokens * (head + outside) + head_fixed + shape.forward_bytes * batch  # before the backward
    peak = max(tokens * (head + outside) + head_fixed + 4 * shape.largest_trainable, tokens * last + last_fixed,
               end_of_forward)
    mask = b * tokens * shape.tokens if shape.mask else 0
    return int(peak + mask + 4 * shape.logits * batch + shape.sample_bytes * batch)


def predict(shape: PhaseShape, run: RunConfig, micro_batch: int | None = None, device: str = "cuda") -> Peak:
    """The peak of one optimizer step with the run's settings (micro_batch: samples per process
    per micro-step; default the run's batch on one process; device: "cuda", or "cpu" for a
    measured CPU step)."""
    batch = micro_batch or run.batch_size
    weights = int(shape.frozen * WEIGHT_BYTES[shape.frozen_dtype]) + shape.fixed_bytes
    trainable = 8 * shape.trainable
    optimizer = int(STATE_BYTES[run.optimizer] * shape.trainable)
    # torch's AdamW on CUDA updates every tensor at once (foreach): one fp32 temporary per trainable
    # parameter; on the CPU it goes one tensor at a time: two temporaries of the largest
    step_extra = 4 * shape.trainable if device == "cuda" else 8 * shape.largest_trainable
    if run.optimizer == "cpu_offload":
        step_extra = 0
    activations = activation_bytes(shape, batch, run.gradient_checkpointing, device)
    return Peak(weights, trainable, optimizer, activations, step_extra)


# ---------------------------------------------------------------------------------------------
# Fitting a card


@dataclass(frozen=True)
class Saving:
    """One setting that lowers the peak, in the order they are tried (least change first)."""

    key: str  # "run.gradient_checkpointing", "phase.quantize", ...
    value: Any
    why: str


SAVINGS: tuple[Saving, ...] = (
    Saving("run.gradient_checkpointing", True, "recompute each layer in the backward instead of keeping its activations"),
    Saving("run.optimizer", "adamw8bit", "8-bit optimizer states (torchao) instead of fp32"),
    Saving("phase.quantize", "int8", "frozen base weights in int8 (torchao), the LoRA on top"),
    Saving("run.optimizer", "cpu_offload", "optimizer states and step in host memory (torchao)"),
)


@dataclass
class Fit:
    fits: bool
    card_gib: float
    need_gib: float
    changes: list[Saving]
    run: RunConfig
    phase: dict[str, Any]
    message: str


def _apply(run: RunConfig, phase: dict[str, Any], saving: Saving) -> tuple[RunConfig, dict[str, Any]] | None:
    section, _, key = saving.key.partition(".")
    if section == "run":
        if getattr(run, key) == saving.value:
            return None
        return dataclasses.replace(run, **{key: saving.value}), phase
    if key not in phase or phase[key] == saving.value:
        return None  # the phase has no such setting (the decoder phases have no quantised base)
    return run, {**phase, key: saving.value}


ShapeFn = Callable[[RunConfig, dict[str, Any]], PhaseShape]


def fit(shape_of: ShapeFn, run: RunConfig, phase: dict[str, Any], card_gib: float) -> Fit:
    """The config as given if it fits `card_gib`; else the savings, in order, until it fits; else
    a refusal that says how much the most frugal settings need."""
    changes: list[Saving] = []
    need = predict(shape_of(run, phase), run).need_gib()
    if need <= card_gib:
        return Fit(True, card_gib, need, [], run, phase, f"fits: {need:.1f} GiB of {card_gib:.1f} GiB with the config as given")
    for saving in SAVINGS:
        applied = _apply(run, phase, saving)
        if applied is None:
            continue
        run, phase = applied
        changes.append(saving)
        need = predict(shape_of(run, phase), run).need_gib()
        if need <= card_gib:
            said = "; ".join(f"{c.key}={c.value!r} ({c.why})" for c in changes)
            return Fit(True, card_gib, need, changes, run, phase,
                       f"fits with {said}: {need:.1f} GiB of {card_gib:.1f} GiB")
    said = ", ".join(f"{c.key}={c.value!r}" for c in changes) or "the config as given"
    return Fit(False, card_gib, need, changes, run, phase,
               f"does not fit: {need:.1f} GiB needed with {said}, the card offers {card_gib:.1f} GiB; "
               f"a card of {_smallest_card(need)} would do, or lower run.batch_size / the sequence length")


def _smallest_card(need_gib: float) -> str:
    for gb in (8, 12, 16, 20, 24, 32, 40, 48, 80, 96, 141):
        if usable_gib(gb) >= need_gib:
            return f"{gb} GB"
    return "more than 141 GB (several GPUs: DeepSpeed ZeRO-2 or FSDP)"


def card_gib(gpu_memory: str | None) -> tuple[float, str] | None:
    """The card to fit: the free memory of the GPU in use, else `--gpu-memory` (e.g. 24GiB, 16GB)."""
    import torch

    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        return free / GiB, f"{torch.cuda.get_device_name()} ({free / GiB:.1f} GiB free of {total / GiB:.1f})"
    if gpu_memory is None:
        return None
    return parse_size(gpu_memory), f"--gpu-memory {gpu_memory}"


def parse_size(text: str) -> float:
    """'24GiB' -> 24.0, '24GB' -> a card sold as 24 GB (usable_gib), a bare number: GB."""
    raw = text.strip().replace(" ", "")
    lower = raw.lower()
    try:
        if lower.endswith("gib"):
            return float(raw[:-3])
        if lower.endswith("gb"):
            return usable_gib(float(raw[:-2]))
        return usable_gib(float(raw))
    except ValueError:
        raise ValueError(f"--gpu-memory {text!r}: expected a size like 24GiB or 16GB") from None


# ---------------------------------------------------------------------------------------------
# The phases' shapes


SHAPE_FUNCTIONS = {"a": "training.decoder_a", "b": "training.mllm_recipe", "c": "training.decoder_c"}


def shape_function(phase: str) -> ShapeFn:
    """`phase_shape(run, phase_table)` of the phase's recipe module."""
    module = importlib.import_module(SHAPE_FUNCTIONS[phase])
    function = getattr(module, "phase_shape", None)
    if function is None:
        raise LookupError(f"phase ({phase}) has no memory shape yet ({SHAPE_FUNCTIONS[phase]}.phase_shape)")
    return function


def table(phases: dict[str, tuple[ShapeFn, RunConfig, dict[str, Any]]], cards_gb: Sequence[int] = CARDS_GB) -> str:
    """Markdown: per phase, the peak with its config, and per card what fits (and with what)."""
    lines = ["| phase | config's peak (GiB) | " + " | ".join(f"{gb} GB" for gb in cards_gb) + " |",
             "| --- | --- | " + " | ".join("---" for _ in cards_gb) + " |"]
    for name, (shape_of, run, phase) in phases.items():
        need = predict(shape_of(run, phase), run).need_gib()
        cells = []
        for gb in cards_gb:
            f = fit(shape_of, run, phase, usable_gib(gb))
            if not f.fits:
                cells.append(f"no ({f.need_gib:.1f})")
            elif not f.changes:
                cells.append(f"yes ({f.need_gib:.1f})")
            else:
                cells.append(", ".join(f"{c.key.split('.')[1]}={c.value}" for c in f.changes) + f" ({f.need_gib:.1f})")
        lines.append(f"| {name} | {need:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
