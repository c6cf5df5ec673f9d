"""8-bit and 4-bit MLLM weights, through torchao (a maintained PyTorch quantisation library).

The one adapter module for torchao: every torchao name the project uses is here.

- int8 (24 GB cards, and 12-16 GB ones with stage offload): torchao's `Int8WeightOnlyConfig`. Each
  Linear of the merged Mistral keeps int8 weights with per-channel scales and dequantises on the
  fly (activations stay bf16): the 7B's linears go from ~14 GB to ~7 GB.
- int4 (8 GB cards, with stage offload): torchao's `Int4WeightOnlyQuantizer` (asymmetric 4-bit,
  one bf16 scale and zero per group of 128 input columns: ~0.53 bytes per weight, ~3.6 GiB for
  the decoder layers). Its `WeightOnlyInt4Linear` runs PyTorch's int4 kernels, the tinygemm one on
  CUDA and `_weight_int4pack_mm_for_cpu` on a CPU: the same code on both, so a CPU run proves the
  GPU's path. The packed layout differs between the two, so a model is quantised on the device it
  will run on (its host copy in stage offload is those bytes, moved as they are). torchao 0.18's
  `Int4WeightOnlyConfig` has no CPU packing, hence the quantizer.

The embedding, the lm_head (32,284 rows: the int4 kernel needs a multiple of 8) and the small
input/output projections stay in the model dtype.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING
from unittest.mock import patch

import torch

if TYPE_CHECKING:
    from .model import AnimeGamerMLLM

QUANTIZATIONS = ("int8", "int4")
INT4_GROUP = 128  # input columns per scale and zero (32 where a small model's widths need it)


def quantize_weights(model: AnimeGamerMLLM, mode: str) -> int:
    """Quantise the Mistral body's (and for int8 the lm_head's) Linear weights in place; returns how many."""
    lm = model.causal_lm
    if mode == "int4":
        return sum(quantize_linears(layer, mode) for layer in lm.model.layers)
    return quantize_linears(lm, mode)


def _torchao():
    try:
        import torchao.quantization as q
    except ImportError as e:
        raise RuntimeError("8-bit and 4-bit MLLM weights need torchao: pip install torchao") from e
    return q


def quantize_linears(module: torch.nn.Module, mode: str) -> int:
    """Quantise every Linear weight under `module` in place (one decoder layer at a time keeps a
    full-size build's peak low), on the device the weights are on; returns how many."""
    if mode not in QUANTIZATIONS:
        raise ValueError(f"MLLM quantisation must be one of {QUANTIZATIONS}, got {mode!r}")
    q = _torchao()

    def is_linear(m: torch.nn.Module, fqn: str = "") -> bool:
        return isinstance(m, torch.nn.Linear)

    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    if mode == "int8":
        q.quantize_(module, q.Int8WeightOnlyConfig(), filter_fn=is_linear)
        return len(linears)
    fits = [m for m in linears if m.bias is None and m.out_features % 8 == 0]
    if len(fits) != len(linears):
        raise ValueError("int4 weights need Linear layers without bias and with a multiple of 8 outputs; "
                         f"{type(module).__name__} has others")
    if not linears:
        return 0
    group = INT4_GROUP if all(m.in_features % INT4_GROUP == 0 for m in linears) else 32
    device = linears[0].weight.device
    with torch.no_grad():
        q.Int4WeightOnlyQuantizer(groupsize=group, device=device, precision=torch.bfloat16).quantize(module)
    return len(linears)


def is_int4(module: torch.nn.Module) -> bool:
    from torchao.quantization.linear_quant_modules import WeightOnlyInt4Linear

    return isinstance(module, WeightOnlyInt4Linear)


def _meta_int4_forward(x, weight_int4pack, scales_and_zeros, out_features, groupsize, precision=torch.bfloat16,
                       scales_precision=torch.bfloat16):
    """What the int4 kernel allocates: its output, in the input's dtype (the meta device has no
    kernel for it outside a FakeTensorMode). The bf16 cast of an fp32 input is counted too."""
    if x.dtype != precision:
        x = x.to(precision)
    c = torch.empty((*x.shape[:-1], out_features), dtype=precision, device=x.device)
    return c if c.dtype == x.dtype else c.to(x.dtype)


@contextlib.contextmanager
def int4_on_meta() -> Iterator[None]:
    """Lets `WeightOnlyInt4Linear` run on the meta device (the memory plan's trace)."""
    import torchao.quantization.linear_quant_modules as lqm

    with patch.object(lqm, "linear_forward_int4", _meta_int4_forward):
        yield
