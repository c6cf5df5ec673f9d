"""Tiny configurations of the decoder for tests and CPU benchmarks (random weights, same code)."""

from __future__ import annotations

from typing import Any

import torch

from diffusers import AutoencoderKLCogVideoX

from inference.decoder.pipeline import AnimeGamerDecoder
from inference.decoder.transformer import AnimeGamerTransformer3DModel
from inference.decoder.vae import SCALE_FACTOR

TINY_TRANSFORMER_CONFIG: dict[str, Any] = {
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
    "sample_frames": 17,
    "patch_size": 2,
    "temporal_compression_ratio": 4,
    "max_text_seq_length": 226,
    "norm_eps": 1e-5,
    "final_norm_eps": 1e-6,
    "spatial_interpolation_scale": 1.875,
    "temporal_interpolation_scale": 1.0,
}

TINY_VAE_CONFIG: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["CogVideoXDownBlock3D"] * 4,
    "up_block_types": ["CogVideoXUpBlock3D"] * 4,
    "block_out_channels": [8, 8, 8, 8],
    "latent_channels": 4,
    "layers_per_block": 1,
    "act_fn": "silu",
    "norm_eps": 1e-6,
    "norm_num_groups": 4,
    "temporal_compression_ratio": 4,
    "sample_height": 32,
    "sample_width": 48,
    "scaling_factor": SCALE_FACTOR,
}
TINY_SIZE = {"height": 32, "width": 48}  # latent 4 x 6 through the 8x VAE


def random_tiny_decoder(seed: int = 0, steps: int = 4, sampler: str = "released") -> AnimeGamerDecoder:
    torch.manual_seed(seed)
    transformer = AnimeGamerTransformer3DModel(**TINY_TRANSFORMER_CONFIG)
    with torch.no_grad():
        transformer.uncond_embedding.normal_()
    vae = AutoencoderKLCogVideoX(**TINY_VAE_CONFIG)
    return AnimeGamerDecoder(transformer, vae, steps=steps, sampler=sampler, **TINY_SIZE)
