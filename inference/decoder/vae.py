"""Latents -> frames with diffusers' AutoencoderKLCogVideoX (the stock CogVideoX 3D VAE).

The released decoder divides the latents by the scale factor and decodes them in chunks, the
first of three latent frames and the rest of two ([0:3], [3:5] for AnimeGamer's five), carrying the
causal convolutions' cache from chunk to chunk: 5 latent frames -> 1 + 4 * 4 = 17 video frames.
diffusers' public `AutoencoderKLCogVideoX.decode` runs exactly these chunks for odd frame counts
(tests/decoder/test_diffusers_api.py checks it against the explicit loop), plus slicing/tiling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .diffusers_api import AutoencoderKLCogVideoX, decode_vae, vae_config

SCALE_FACTOR = 1.15258426

# CogVideoX-2B's VAE (diffusers' defaults, spelled out).
COGVIDEOX_VAE_CONFIG: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["CogVideoXDownBlock3D"] * 4,
    "up_block_types": ["CogVideoXUpBlock3D"] * 4,
    "block_out_channels": [128, 256, 256, 512],
    "latent_channels": 16,
    "layers_per_block": 3,
    "act_fn": "silu",
    "norm_eps": 1e-6,
    "norm_num_groups": 32,
    "temporal_compression_ratio": 4,
    "sample_height": 480,
    "sample_width": 720,
    "scaling_factor": SCALE_FACTOR,
}


def latent_chunks(num_frames: int) -> list[tuple[int, int]]:
    """The release's split: [0:3], then pairs ([3:5], [5:7], ...); a single chunk below 3."""
    if num_frames <= 3:
        return [(0, num_frames)]
    if num_frames % 2 == 0:
        raise ValueError(f"the released split needs an odd latent frame count, got {num_frames}")
    return [(0, 3)] + [(s, s + 2) for s in range(3, num_frames, 2)]


@torch.no_grad()
def decode_latents(vae: AutoencoderKLCogVideoX, latents: torch.Tensor) -> torch.Tensor:
    """Sampler latents (B, T, C, h, w), still multiplied by the scale factor -> video (B, C, F, H, W) in [-1, 1]."""
    z = (latents / vae_config(vae).scaling_factor).permute(0, 2, 1, 3, 4).to(vae.dtype)  # (B, C, T, h, w)
    latent_chunks(z.shape[2])  # the released split needs an odd count; diffusers' decode runs it
    return decode_vae(vae, z)


def uint8_video(video: torch.Tensor) -> torch.Tensor:
    """(B, C, F, H, W) in [-1, 1] -> uint8 (B, F, H, W, 3), on the video's device."""
    x = ((video.float() + 1.0) / 2.0).clamp(0.0, 1.0)
    x = (x * 255.0).round().to(torch.uint8)  # (the release truncates instead of rounding)
    return x.permute(0, 2, 3, 4, 1)


def to_uint8_frames(video: torch.Tensor) -> np.ndarray:
    """(B, C, F, H, W) in [-1, 1] -> uint8 (B, F, H, W, 3) as numpy."""
    return uint8_video(video).cpu().numpy()
