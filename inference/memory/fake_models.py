"""The released architectures at full size on the meta device, for tracing memory without it.

Meta tensors carry shapes, dtypes and storage sizes but no data: the real modules and their
forward code run on them in moments, with nothing allocated. (Fake CUDA tensors would also need
no GPU, but indexing one takes a CUDA device guard, which a CPU-only PyTorch build refuses.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from inference.decoder.pipeline import AnimeGamerDecoder
    from inference.mllm.model import AnimeGamerMLLM


def build_mllm(dtype: torch.dtype, shape: dict[str, Any], rep_dim: int, quantize: str | None = None) -> AnimeGamerMLLM:
    """An AnimeGamerMLLM (Mistral, LoRA merged as a worker holds it, plus the two projections) in
    `dtype` with the fp32 buffers the loader keeps, and `quantize` ("int8") applied by the worker's
    own code."""
    from transformers import MistralConfig, MistralForCausalLM

    from inference.mllm.loading import cast_keeping_fp32_buffers
    from inference.mllm.model import AnimeGamerMLLM

    with torch.device("meta"):
        llm = MistralForCausalLM(MistralConfig(**shape))
        llm.set_attn_implementation("sdpa")  # as the worker loads it (inference.mllm.loading)
        model = AnimeGamerMLLM(llm, rep_dim)
    model = cast_keeping_fp32_buffers(model, "meta", dtype).eval().requires_grad_(False)
    if quantize:
        from inference.mllm.quantize import quantize_weights

        quantize_weights(model, quantize)
    return model


def build_decoder(dtype: torch.dtype, dit_config: dict, vae_config: dict, size: dict[str, int], low_vram: bool,
                  steps: int = 2, tiles: tuple[int, int] | None = None) -> AnimeGamerDecoder:
    """An AnimeGamerDecoder with the worker's memory mode applied (`prepare`'s VAE options);
    `tiles`: the VAE's tile (height, width) where a run sets its own."""
    from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
    from inference.decoder.pipeline import AnimeGamerDecoder, vae_memory_mode
    from inference.decoder.transformer import AnimeGamerTransformer3DModel

    with torch.device("meta"):
        dit = AnimeGamerTransformer3DModel(**dit_config)
        vae = AutoencoderKLCogVideoX(**vae_config)
    for model in (dit, vae):
        torch.nn.Module.to(model, dtype)  # (diffusers' `to` wrapper reads as unbound to a type checker)
    decoder = AnimeGamerDecoder(dit, vae, steps=steps, height=size["height"], width=size["width"])
    vae_memory_mode(decoder.vae, low_vram)  # as inference.decoder.pipeline.prepare does
    if tiles:
        decoder.vae.enable_tiling(tile_sample_min_height=tiles[0], tile_sample_min_width=tiles[1])
    return decoder
