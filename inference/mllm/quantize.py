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
    if mode not in QUANTIZATIONS:
        raise ValueError(f"MLLM quantisation must be one of {QUANTIZATIONS}, got {mode!r}")
    try:
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
    except ImportError as e:
        raise RuntimeError("8-bit MLLM weights need torchao: pip install torchao") from e
    llm = model.causal_lm

    def is_llm_linear(module: torch.nn.Module, fqn: str) -> bool:
        return isinstance(module, torch.nn.Linear)

    count = sum(1 for n, m in llm.named_modules() if is_llm_linear(m, n))
    quantize_(llm, Int8WeightOnlyConfig(), filter_fn=is_llm_linear)
    return count
