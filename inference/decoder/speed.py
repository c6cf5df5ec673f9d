"""Speed presets of the decoder DiT, built from maintained library features.

- `exact` (default): nothing changes; output is bit-identical to the plain model.
- `fast`: numerically equivalent up to float rounding (no step is skipped or approximated):
  cuDNN SDPA through diffusers' attention dispatcher (CUDA only), fused q/k/v projections (one
  matmul instead of three), regional `torch.compile` of the 30 repeated DiT blocks
  (`ModelMixin.compile_repeated_blocks`; the first clip pays the compile).
- `fastest`: `fast` plus two lossy features: FP8 linears (torchao's dynamic float8 activations
  and weights, per-row scales for a bf16 DiT, per-tensor for fp16; GPUs of compute capability 8.9 or newer) and diffusers'
  FirstBlockCache (a step whose first-block residual barely changed reuses the cached output of
  the other blocks). Of diffusers' caches this one fits our loop: it needs no timestep callback
  (Pyramid Attention Broadcast does) and no separate guidance passes (FasterCache assumes them;
  our guidance runs both branches in one batch).

`apply_speed` returns what it applied and what it skipped, each with the reason (a CPU skips the
CUDA-only features and says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import diffusers_api

SPEEDS = ("exact", "fast", "fastest")
CUDNN_ATTENTION = "_native_cudnn"
FIRST_BLOCK_CACHE_THRESHOLD = 0.08  # ParaAttention suggests 0.08-0.12 for video models
FP8_MIN_CAPABILITY = (8, 9)  # Ada / Hopper and newer have FP8 tensor cores


@dataclass
class SpeedReport:
    speed: str
    applied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "feature: reason"

    def summary(self) -> str:
        parts = [f"speed {self.speed}"]
        if self.applied:
            parts.append("applied " + ", ".join(self.applied))
        if self.skipped:
            parts.append("skipped " + "; ".join(self.skipped))
        return parts[0] + (": " + " | ".join(parts[1:]) if parts[1:] else "")


def check_speed(speed: str) -> str:
    if speed not in SPEEDS:
        raise ValueError(f"decoder speed must be one of {', '.join(SPEEDS)}, got {speed!r}")
    return speed


def fp8_supported(device: torch.device) -> str | None:
    """None when FP8 linears can run on `device`, else the reason they cannot."""
    if device.type != "cuda":
        return "needs a CUDA GPU"
    if torch.cuda.get_device_capability(device) < FP8_MIN_CAPABILITY:
        return f"needs compute capability {FP8_MIN_CAPABILITY[0]}.{FP8_MIN_CAPABILITY[1]}+"
    try:
        import torchao  # noqa: F401
    except ImportError:
        return "torchao is not installed (pip install torchao)"
    return None


def _fp8_linears(transformer: torch.nn.Module) -> int:
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor, quantize_

    def in_blocks(module: torch.nn.Module, fqn: str) -> bool:  # the DiT body only; embeddings stay
        return isinstance(module, torch.nn.Linear) and fqn.startswith("transformer_blocks.") and module.in_features % 16 == 0

    count = sum(1 for n, m in transformer.named_modules() if in_blocks(m, n))
    # Row-wise scaled FP8 matmuls produce bf16 only; the fp16 DiT (the release's dtype) uses one scale per tensor.
    granularity = PerRow() if transformer.dtype == torch.bfloat16 else PerTensor()
    quantize_(transformer, Float8DynamicActivationFloat8WeightConfig(granularity=granularity), filter_fn=in_blocks)
    return count


def _same_device(a: torch.device, b: torch.device) -> bool:
    """"cuda" and "cuda:0" are one device when the current one is 0 (no index: the current device)."""
    if a.type != b.type:
        return False
    if a.type != "cuda" or a.index == b.index:
        return True
    current = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)


def apply_speed(
    transformer, speed: str, compile_backend: str = "inductor", runs_on: torch.device | str | None = None,
) -> SpeedReport:
    """Apply `speed` to a loaded AnimeGamerTransformer3DModel in place (call once, after .to(device)).

    compile_backend: torch.compile's backend ("inductor" on GPU; tests on CPU pass "eager", which
    traces the same graphs without generating kernels). runs_on: the device the DiT will decode on,
    when that is not where it is now: a multi-film worker builds its decoders on the CPU and the
    residency manager moves their weights to the GPU as plain tensors, which FP8's quantised
    weights are not, so there FP8 is left out and said so."""
    report = SpeedReport(check_speed(speed))
    if speed == "exact":
        return report
    device = transformer.device if runs_on is None else torch.device(runs_on)
    moved = not _same_device(device, transformer.device)
    if device.type == "cuda":
        transformer.set_attention_backend(CUDNN_ATTENTION)
        report.applied.append("cuDNN attention")
    else:
        report.skipped.append("cuDNN attention: needs CUDA")
    report.applied.append(f"fused qkv ({diffusers_api.fuse_qkv(transformer)} attentions)")
    if speed == "fastest":
        why_not = "the weights move between CPU and GPU (several films)" if moved else fp8_supported(device)
        if why_not is None:
            report.applied.append(f"FP8 linears ({_fp8_linears(transformer)})")
        else:
            report.skipped.append(f"FP8 linears: {why_not}")
        transformer.enable_cache(diffusers_api.FirstBlockCacheConfig(threshold=FIRST_BLOCK_CACHE_THRESHOLD))
        report.applied.append(f"FirstBlockCache (threshold {FIRST_BLOCK_CACHE_THRESHOLD})")
    transformer.compile_repeated_blocks(backend=compile_backend, fullgraph=False)
    report.applied.append(f"regional torch.compile ({compile_backend})")
    return report
