"""8-bit MLLM weights for a 24 GB card, through torchao (a maintained PyTorch quantisation library).

Int8 weight-only: each Linear of the merged Mistral keeps int8 weights with per-channel scales and
dequantises on the fly (activations stay bf16). The 7B's linears go from ~14 GB to ~7 GB; the
embedding and the small input/output projections stay in the model dtype. Works on CPU and GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .model import AnimeGamerMLLM

QUANTIZATIONS = ("int8",)


def quantize_weights(model: AnimeGamerMLLM, mode: str) -> int:
    """Quantise the Mistral body's and lm_head's Linear weights in place; returns how many."""
    return quantize_linears(model.causal_lm, mode)


def quantize_linears(module: torch.nn.Module, mode: str) -> int:
    """Quantise every Linear weight under `module` in place (one decoder layer at a time keeps a
    full-size build's peak low); returns how many."""
    if mode not in QUANTIZATIONS:
        raise ValueError(f"MLLM quantisation must be one of {QUANTIZATIONS}, got {mode!r}")
    try:
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
    except ImportError as e:
        raise RuntimeError("8-bit MLLM weights need torchao: pip install torchao") from e

    def is_linear(m: torch.nn.Module, fqn: str) -> bool:
        return isinstance(m, torch.nn.Linear)

    count = sum(1 for n, m in module.named_modules() if is_linear(m, n))
    quantize_(module, Int8WeightOnlyConfig(), filter_fn=is_linear)
    return count
