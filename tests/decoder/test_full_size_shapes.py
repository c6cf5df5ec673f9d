"""The full-size decoder's shapes, end to end, without its weights or its FLOPs: the released 2B DiT
and the CogVideoX VAE built on PyTorch's meta device (tensors with shapes and dtypes, no data) take
a GPU batch of two sessions x guidance at 480x720 and give 17 frames per clip. The tiny configs
the other tests use change the sizes; this proves the sizes the GPU runs (and bench/gpu.sh times)
fit together, with the `fast` preset's fused projections too, in about a second on a CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from inference.decoder.diffusers_api import AutoencoderKLCogVideoX, fuse_qkv
from inference.decoder.pipeline import AnimeGamerDecoder
from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG, AnimeGamerTransformer3DModel
from inference.decoder.vae import COGVIDEOX_VAE_CONFIG, decode_latents

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # last: bench/queue.py must not shadow the stdlib
import gpu  # noqa: E402  (bench/gpu.py: its analytic FLOPs)

SESSIONS = 2


@pytest.fixture(scope="module")
def full_size() -> AnimeGamerDecoder:
    with torch.device("meta"):
        dit = AnimeGamerTransformer3DModel(**ANIMEGAMER_2B_CONFIG).half()  # the release runs the DiT in fp16
        vae = AutoencoderKLCogVideoX(**COGVIDEOX_VAE_CONFIG).half()
    return AnimeGamerDecoder(dit, vae)


def _velocity(decoder: AnimeGamerDecoder) -> torch.Tensor:
    rows = 2 * SESSIONS  # unconditional and conditional rows of each session in one forward
    meta = {"device": "meta"}
    with torch.no_grad():
        return decoder.transformer.predict_v(
            torch.zeros((rows, *decoder.latent_shape), dtype=torch.float16, **meta),
            torch.zeros((rows, *decoder.context_shape), dtype=torch.float16, **meta),
            torch.zeros((rows,), dtype=torch.long, **meta),
            torch.zeros((rows,), dtype=torch.float32, **meta),
        )


def test_released_sizes(full_size):
    assert full_size.latent_shape == (5, 16, 60, 90)  # 17 frames of 480x720: 4x temporal, 8x spatial
    assert full_size.context_shape == (226, 1920)  # the MLLM's representation
    params = sum(p.numel() for p in full_size.transformer.parameters())
    assert 1.6e9 < params < 1.8e9, params  # CogVideoX-2B plus the motion-scope embedding


def test_a_batch_of_sessions_flows_through_the_full_size_dit_and_vae(full_size):
    v = _velocity(full_size)
    assert v.shape == (2 * SESSIONS, *full_size.latent_shape) and v.dtype == torch.float16
    with torch.no_grad():
        frames = decode_latents(full_size.vae, torch.zeros((SESSIONS, *full_size.latent_shape), dtype=torch.float16, device="meta"))
    assert frames.shape == (SESSIONS, 3, 17, 480, 720)


def test_fused_projections_keep_the_full_size_shapes():
    with torch.device("meta"):
        decoder = AnimeGamerDecoder(AnimeGamerTransformer3DModel(**ANIMEGAMER_2B_CONFIG).half(),
                                    AutoencoderKLCogVideoX(**COGVIDEOX_VAE_CONFIG).half())
    assert fuse_qkv(decoder.transformer) == ANIMEGAMER_2B_CONFIG["num_layers"]
    assert _velocity(decoder).shape == (2 * SESSIONS, *decoder.latent_shape)


def test_the_analytic_denoise_flops_are_the_documented_scale(full_size):
    """6,976 tokens per forward, x2 guidance, x50 steps: about 3.0e15 FLOP per clip."""
    flops = gpu.dit_flops_per_clip(ANIMEGAMER_2B_CONFIG, full_size.latent_shape, steps=50)
    assert 2.7e15 < flops < 3.3e15, f"{flops:.3g}"
