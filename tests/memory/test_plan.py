"""inference.memory.plan: a turn's memory traced through the real model code on the meta device.

Held against a real run at tiny size in tests/bench/test_fullsize_bench.py (bench/fullsize.py
--tiny: each stage's measured peak within 15 % of the plan, in every mode), and here at full size
against what is known of the released models (their weights' sizes; a VAE decode that must not
grow with the number of sessions)."""

from __future__ import annotations

import pytest
import torch

from inference.memory.live import GiB
from inference.memory.plan import Precision, Shapes, advise, compose, predict, trace


@pytest.fixture(scope="module")
def full_size():
    """Every mode at 1 session (shared with doctor's tests: traced once per run) and resident at 4,
    at the released sizes (about 30 s on two cores)."""
    from inference.memory.choose_mode import predictions

    preds = [*predictions(1), *predict(sessions=(4,), modes=("resident",))]
    return {(p.mode, p.sessions): p for p in preds}


def test_full_size_weights_are_the_released_models(full_size):
    resident = full_size["resident", 1].devices["gpu0"]["weights"].allocated / GiB
    two = full_size["two_gpus", 1].devices
    mllm, decoder = two["gpu0"]["weights"].allocated / GiB, two["gpu1"]["weights"].allocated / GiB
    assert 13.4 < mllm < 13.7  # Mistral-7B with 32,284 rows, bf16, LoRA merged, + the two projections
    assert 3.4 < decoder < 3.7  # the 2B DiT (1.69e9 parameters) and the VAE in fp16
    assert resident == pytest.approx(mllm + decoder)
    low = full_size["low_vram", 1].devices["gpu0"]["weights"].allocated / GiB
    assert low < resident - 6  # int8 linears


def test_the_vae_decodes_sessions_one_by_one(full_size):
    """Untiled, one clip's VAE decode holds ~15 GiB of activations at 480x720: decoded together,
    4 sessions would need ~60 GiB (the fix: clips always go through the VAE one at a time)."""
    one = full_size["resident", 1].devices["gpu0"]["vae"].allocated
    four = full_size["resident", 4].devices["gpu0"]["vae"].allocated
    weights = full_size["resident", 1].devices["gpu0"]["weights"].allocated
    assert 12 * GiB < one - weights < 18 * GiB
    assert four - one < 1 * GiB


def test_a_24_gb_card_runs_low_vram_and_not_resident(full_size):
    preds = list(full_size.values())
    card = 24e9 / GiB
    assert advise([card], "low_vram", 1, preds).fits
    resident = advise([card], "resident", 1, preds)
    assert not resident.fits and "low_vram fits" in resident.message
    assert advise([80.0], "resident", 4, preds).fits
    assert "needs two GPUs; found 1" in advise([card], "two_gpus", 1, preds).message
    with pytest.raises(ValueError, match="no prediction for low_vram at 4"):
        advise([card], "low_vram", 4, preds)


def test_vae_slicing_keeps_each_clip_and_its_memory(tmp_path):
    """The smallest size that shows the fix: B clips through a prepared decoder's VAE give each
    clip's own frames, with the VAE's activations of one clip, not B."""
    from inference.decoder.pipeline import prepare
    from inference.decoder.vae import decode_latents
    from inference.memory.live import LiveBytes
    from testkit.tiny.decoder import random_tiny_decoder

    dec = random_tiny_decoder()
    prepare(dec, "cpu")
    latents = torch.randn((3, *dec.latent_shape), generator=torch.Generator().manual_seed(0))
    peaks = {}
    with torch.no_grad():
        for b in (1, 3):
            with LiveBytes("cpu") as live:
                x = latents[:b].clone()
                with live.stage("vae") as stage:
                    out = decode_latents(dec.vae, x)
                peaks[b] = stage.peak - out.untyped_storage().nbytes() - x.untyped_storage().nbytes()
            if b == 3:
                together = out
        alone = torch.cat([decode_latents(dec.vae, latents[i : i + 1]) for i in range(3)])
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-6)
    assert peaks[3] < 1.3 * peaks[1]


def test_trace_of_a_tiny_turn_on_cuda_rounds_to_allocator_blocks():
    from testkit.tiny.decoder import TINY_SIZE, TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG
    from testkit.tiny.mllm import tiny_config

    shapes = Shapes(tiny_config(vocab_size=32284).to_dict(), dict(TINY_TRANSFORMER_CONFIG), dict(TINY_VAE_CONFIG),
                    dict(TINY_SIZE), rep_dim=TINY_TRANSFORMER_CONFIG["text_embed_dim"])
    cpu = trace(shapes, Precision(torch.float32, torch.float32), 1, device="cpu")
    cuda = trace(shapes, Precision(torch.float32, torch.float32), 1, device="cuda")
    for stage in ("mllm", "denoise", "vae"):
        assert cuda.activations[stage] >= cpu.activations[stage] > 0
        assert cuda.activations[stage] % 512 == 0
    p = compose("two_gpus", 1, cuda)
    assert set(p.devices) == {"gpu0", "gpu1"} and "vae" not in p.devices["gpu0"]


def test_a_prediction_that_cannot_run_does_not_keep_a_worker_from_starting(monkeypatch, caplog):
    from inference.memory import choose_mode
    from settings import Settings

    def broken(*a, **k):
        raise RuntimeError("no meta kernel for this op")

    monkeypatch.setattr(choose_mode, "check", broken)
    assert choose_mode.refusal(Settings(_env_file=None), sessions=1) is None
    assert "could not run" in caplog.text
