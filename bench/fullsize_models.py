"""The models bench/fullsize.py runs: random weights at a given architecture, built as a worker holds
them (nothing downloaded), in the CPU's fast dtype."""

from __future__ import annotations

from pathlib import Path

import torch

from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
from inference.decoder.pipeline import AnimeGamerDecoder
from inference.decoder.transformer import AnimeGamerTransformer3DModel
from testkit.tiny import mllm as tiny_mllm


def fast_dtype() -> tuple[torch.dtype, str]:
    """The CPU's fast dtype for both models (a GPU runs the decoder in fp16): bf16 where the CPU
    has AMX or AVX-512 BF16 (several times fp32's rate), fp32 elsewhere (without them PyTorch's bf16
    matmul takes a reference path two orders of magnitude slower)."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        flags = set()
    if flags & {"amx_bf16", "avx512_bf16"}:
        return torch.bfloat16, "bf16 (the CPU has " + ", ".join(sorted(flags & {"amx_bf16", "avx512_bf16"})) + ")"
    return torch.float32, "fp32 (this CPU has neither AMX nor AVX-512 BF16: bf16 matmuls would take a reference path)"


def quantized_mllm(mllm_shape: dict, rep_dim: int, dtype: torch.dtype, how: str = "int8") -> torch.nn.Module:
    """The MLLM as low_vram / offload (int8) or offload_int4 (int4) holds it, built one decoder
    layer at a time, each layer's linears quantised as soon as it exists (the worker's
    quantize_linears): the whole model in `dtype` first would need 14.5 GB (bf16) or 29 GB (fp32)
    at Mistral-7B's shape. Random weights, normal(0, 0.02). `mllm_shape`: tiny_config's overrides
    ({} for the tiny model)."""
    from transformers import MistralForCausalLM

    from inference.mllm.model import AnimeGamerMLLM
    from inference.mllm.quantize import quantize_linears

    cfg = tiny_mllm.tiny_config(**{"vocab_size": 32284, **mllm_shape}, attn_implementation="sdpa")
    with torch.device("meta"):
        model = AnimeGamerMLLM(MistralForCausalLM(cfg), rep_dim)
    g = torch.Generator().manual_seed(0)

    def materialize(m: torch.nn.Module) -> None:
        m.to_empty(device="cpu")
        with torch.no_grad():
            for name, p in m.named_parameters():
                if p.ndim > 1:
                    p.normal_(0.0, 0.02, generator=g)
                else:
                    p.fill_(0.0 if name.endswith("bias") else 1.0)  # biases; norm weights
        m.to(dtype)

    lm = model.causal_lm
    for layer in lm.model.layers:
        materialize(layer)
        quantize_linears(layer, how)
    for m in (lm.model.embed_tokens, lm.model.norm, lm.lm_head, model.input_resampler, model.output_resampler):
        materialize(m)
    if how == "int8":  # (int4 keeps the lm_head: its 32,284 rows are no multiple of 8)
        quantize_linears(lm.lm_head, how)
    with torch.device("cpu"):
        lm.model.rotary_emb = type(lm.model.rotary_emb)(cfg)  # its fp32 inv_freq, computed
    return model.eval().requires_grad_(False)


def random_decoder(dit_cfg: dict, vae_cfg: dict, size: dict, steps: int, dtype: torch.dtype) -> AnimeGamerDecoder:
    """The DiT and the VAE at these configs, built in `dtype` (as from_pretrained loads them), seeded."""
    torch.manual_seed(1)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        dit = AnimeGamerTransformer3DModel(**dit_cfg)
        vae = AutoencoderKLCogVideoX(**vae_cfg)
    finally:
        torch.set_default_dtype(default)
    with torch.no_grad():
        dit.uncond_embedding.normal_()
    return AnimeGamerDecoder(dit, vae, steps=steps, **size)
