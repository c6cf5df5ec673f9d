"""Sampling with the converted tiny decoder: released update, seeds, batches, progress."""

from __future__ import annotations

import decoder_sat_reference as ref
import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLCogVideoX

from inference.backend import ClipDecoder
from inference.decoder.pipeline import AnimeGamerDecoder
from inference.decoder.sampler import ReplayNoise, SeededNoise, released_draw_count
from testkit.tiny.decoder import TINY_SIZE, TINY_VAE_CONFIG

STEPS = 4  # t = 999 (a = 0), 749 (previous a = 0), 499 (full 2M), 249 (returns x0)


@pytest.fixture(scope="module")
def decoder(transformer) -> AnimeGamerDecoder:
    torch.manual_seed(0)
    vae = AutoencoderKLCogVideoX(**TINY_VAE_CONFIG)
    return AnimeGamerDecoder(transformer, vae, steps=STEPS, **TINY_SIZE)


def _rep(seed: int, width: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((226, width)).astype(np.float32)


def test_decoder_satisfies_the_clip_decoder_protocol(decoder):
    assert isinstance(decoder, ClipDecoder)
    assert decoder.fps == 8


def test_denoising_matches_the_released_sampler_and_dit(cfg, sat_sd, decoder):
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    reps = np.stack([_rep(1, d), _rep(2, d)])
    scopes = [2.5, 15.0]
    g = torch.Generator().manual_seed(3)
    noises = [torch.randn((2, *decoder.latent_shape), generator=g) for _ in range(released_draw_count(STEPS))]
    assert len(noises) == 1 + 1 + 2 * (STEPS - 2)  # x_T, step 0, two per middle step, none last

    ours = decoder.sample_latents(torch.from_numpy(reps), scopes, ReplayNoise(noises))

    uncond = ref.sat_uncond(sat_sd)
    ctx = torch.cat([uncond.expand(2, -1, -1), torch.from_numpy(reps).double()])
    flow = torch.tensor(scopes * 2, dtype=torch.float64)

    def v_fn(x, t):
        v = ref.sat_forward(sat_sd, cfg, torch.cat([x, x]), ctx, torch.full((4,), t), flow)
        return v.chunk(2)

    expected = ref.released_sample(v_fn, noises, STEPS)
    assert expected.abs().max() > 0.1
    torch.testing.assert_close(ours.double(), expected, rtol=1e-4, atol=1e-4)


def test_replayed_noise_reproduces_a_seeded_run(decoder):
    d = decoder.context_shape[1]
    rep = torch.from_numpy(_rep(4, d))[None]
    seeded = decoder.sample_latents(rep, [10.0], SeededNoise([11], decoder.latent_shape))
    source = SeededNoise([11], decoder.latent_shape)
    draws = [source.draw() for _ in range(released_draw_count(STEPS))]
    replayed = decoder.sample_latents(rep, [10.0], ReplayNoise(draws))
    torch.testing.assert_close(seeded, replayed, rtol=0, atol=0)


def test_same_seed_same_clip_other_seed_other_clip(decoder):
    rep = _rep(5, decoder.context_shape[1])
    a = decoder.decode(rep, 2.5, seed=1234)
    b = decoder.decode(rep, 2.5, seed=1234)
    c = decoder.decode(rep, 2.5, seed=1235)
    assert a.shape == (17, TINY_SIZE["height"], TINY_SIZE["width"], 3) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, b)
    assert np.mean(a != c) > 0.2


def test_batch_rows_equal_single_decodes(decoder):
    d = decoder.context_shape[1]
    reps, scopes, seeds = [_rep(6, d), _rep(7, d)], [0.5, 40.0], [21, 22]
    batch = decoder.sample_latents(torch.from_numpy(np.stack(reps)), scopes, SeededNoise(seeds, decoder.latent_shape))
    for i in range(2):
        single = decoder.sample_latents(torch.from_numpy(reps[i])[None], [scopes[i]], SeededNoise([seeds[i]], decoder.latent_shape))
        torch.testing.assert_close(batch[i : i + 1], single, rtol=1e-5, atol=1e-5)
    frames = decoder.decode_batch(reps, scopes, seeds)
    assert frames.shape == (2, 17, TINY_SIZE["height"], TINY_SIZE["width"], 3)


def test_motion_scope_changes_the_clip(decoder):
    rep = torch.from_numpy(_rep(8, decoder.context_shape[1]))[None]
    lo = decoder.sample_latents(rep, [0.5], SeededNoise([3], decoder.latent_shape))
    hi = decoder.sample_latents(rep, [40.0], SeededNoise([3], decoder.latent_shape))
    assert (lo - hi).abs().max() > 1e-3


def test_progress_is_reported_per_step_then_vae(decoder):
    seen = []
    decoder.decode(_rep(9, decoder.context_shape[1]), 10.0, 5, lambda f, s: seen.append((round(f, 4), s)))
    labels = [s for _, s in seen]
    assert labels[:STEPS] == [f"denoise {i}/{STEPS}" for i in range(1, STEPS + 1)]
    assert labels[STEPS:] == ["vae", "vae"]
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_stock_scheduler_option_runs_and_is_seeded(transformer):
    torch.manual_seed(0)
    dec = AnimeGamerDecoder(transformer, AutoencoderKLCogVideoX(**TINY_VAE_CONFIG), steps=STEPS, sampler="stock", **TINY_SIZE)
    rep = torch.from_numpy(_rep(10, dec.context_shape[1]))[None]
    a = dec.sample_latents(rep, [2.5], SeededNoise([7], dec.latent_shape))
    b = dec.sample_latents(rep, [2.5], SeededNoise([7], dec.latent_shape))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    dec.sampler = "released"
    c = dec.sample_latents(rep, [2.5], SeededNoise([7], dec.latent_shape))
    assert torch.isfinite(a).all() and (a - c).abs().max() > 1e-4  # close schedule, different update


def test_rejects_a_representation_of_the_wrong_shape(decoder):
    with pytest.raises(ValueError, match="representation"):
        decoder.decode(np.zeros((226, 7), np.float32), 2.5, 1)
