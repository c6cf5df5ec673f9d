"""Tiny configurations of the decoder for tests and CPU benchmarks (random weights, same code)."""

from __future__ import annotations

from typing import Any

import torch
from diffusers import AutoencoderKLCogVideoX

from inference.decoder.pipeline import AnimeGamerDecoder
from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG, AnimeGamerTransformer3DModel
from inference.decoder.vae import COGVIDEOX_VAE_CONFIG

# The released configs with only the sizes shrunk: every other value (norms, patching, the 226
# conditioning tokens, the 17 frames) is the real model's, defined once in inference/decoder.
TINY_TRANSFORMER_CONFIG: dict[str, Any] = {
    **ANIMEGAMER_2B_CONFIG,
    "num_attention_heads": 2,
    "attention_head_dim": 16,
    "in_channels": 4,
    "out_channels": 4,
    "time_embed_dim": 24,
    "ofs_embed_dim": 24,
    "text_embed_dim": 32,
    "num_layers": 2,
    "sample_width": 6,
    "sample_height": 4,
}

TINY_VAE_CONFIG: dict[str, Any] = {
    **COGVIDEOX_VAE_CONFIG,
    "block_out_channels": [8, 8, 8, 8],
    "latent_channels": 4,
    "layers_per_block": 1,
    "norm_num_groups": 4,
    "sample_height": 32,
    "sample_width": 48,
}
TINY_SIZE = {"height": 32, "width": 48}  # latent 4 x 6 through the 8x VAE


def random_tiny_decoder(seed: int = 0, steps: int = 4, sampler: str = "released") -> AnimeGamerDecoder:
    torch.manual_seed(seed)
    transformer = AnimeGamerTransformer3DModel(**TINY_TRANSFORMER_CONFIG)
    with torch.no_grad():
        transformer.uncond_embedding.normal_()
    vae = AutoencoderKLCogVideoX(**TINY_VAE_CONFIG)
    return AnimeGamerDecoder(transformer, vae, steps=steps, sampler=sampler, **TINY_SIZE)
