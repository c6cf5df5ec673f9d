"""Speed presets on the tiny decoder (CPU): each runs; `exact` is bit-identical to the plain model.

CUDA-only features (cuDNN attention, FP8 linears) are skipped on a CPU and the preset's report
says so. torch.compile runs with the "eager" backend here: dynamo traces the same blocks, but no
kernels are generated (inductor on 2 shared CPU cores would take minutes).
"""

from __future__ import annotations

import numpy as np
import pytest

from inference.decoder.pipeline import prepare, vae_memory_mode
from inference.decoder.speed import SPEEDS, check_speed
from testkit.tiny.decoder import random_tiny_decoder

STEPS = 3


def _clip(speed: str) -> tuple[np.ndarray, object]:
    decoder = random_tiny_decoder(steps=STEPS)
    report = prepare(decoder, "cpu", speed=speed, compile_backend="eager")
    rep = np.random.default_rng(0).standard_normal(decoder.context_shape).astype(np.float32)
    return decoder.decode_batch([rep, rep * 0.5], [2.5, 10.0], [1, 2]), report


@pytest.fixture(scope="module")
def plain() -> np.ndarray:
    decoder = random_tiny_decoder(steps=STEPS)
    vae_memory_mode(decoder.vae, low_vram=False)  # clips through the VAE one by one, as every prepared decoder
    rep = np.random.default_rng(0).standard_normal(decoder.context_shape).astype(np.float32)
    return decoder.decode_batch([rep, rep * 0.5], [2.5, 10.0], [1, 2])


def test_exact_is_bit_identical_to_the_plain_model(plain):
    frames, report = _clip("exact")
    assert report.applied == [] and report.skipped == []
    np.testing.assert_array_equal(frames, plain)


@pytest.mark.parametrize("speed", ["fast", "fastest"])
def test_preset_runs_on_cpu_and_reports_what_it_skipped(speed, plain):
    frames, report = _clip(speed)
    assert frames.shape == plain.shape and frames.dtype == np.uint8
    assert any(a.startswith("fused qkv") for a in report.applied)
    assert any(a.startswith("regional torch.compile") for a in report.applied)
    assert "cuDNN attention: needs CUDA" in report.skipped
    if speed == "fastest":
        assert any(a.startswith("FirstBlockCache") for a in report.applied)
        assert "FP8 linears: needs a CUDA GPU" in report.skipped
    deviation = np.abs(frames.astype(int) - plain.astype(int)).mean()
    # fast changes only float rounding (fused matmul); fastest may skip blocks: looser
    assert deviation < (1.0 if speed == "fast" else 40.0), deviation
    assert "speed " + speed in report.summary()


def test_warm_up_compiles_before_the_first_turn_and_keeps_the_steps():
    decoder = random_tiny_decoder(steps=STEPS)
    prepare(decoder, "cpu", speed="fast", compile_backend="eager")
    assert decoder.warm_up((1, 2)) > 0
    assert decoder.steps == STEPS


def test_unknown_speed_is_a_clear_error():
    assert SPEEDS == ("exact", "fast", "fastest")
    with pytest.raises(ValueError, match="decoder speed must be one of exact, fast, fastest"):
        check_speed("ludicrous")


def test_a_decoder_built_on_the_cpu_for_the_gpu_gets_the_gpus_preset_but_not_fp8():
    """A multi-film worker loads its decoders on the CPU (the residency manager moves them): the
    preset follows the GPU they decode on, except FP8, whose quantised weights do not move as plain
    tensors. Nothing decodes here: this machine has no CUDA."""
    decoder = random_tiny_decoder(steps=STEPS)
    report = prepare(decoder, "cpu", speed="fastest", compile_backend="eager", runs_on="cuda")
    assert "cuDNN attention" in report.applied
    assert "FP8 linears: the weights move between CPU and GPU (several films)" in report.skipped
    assert decoder.device.type == "cpu"


def test_warm_up_compiled_warms_only_a_compiled_preset():
    from inference.decoder.pipeline import warm_up_compiled

    exact = random_tiny_decoder(steps=STEPS)
    assert warm_up_compiled(exact, max_batch=2) == 0.0
    fast = random_tiny_decoder(steps=STEPS)
    prepare(fast, "cpu", speed="fast", compile_backend="eager")
    sizes = []
    inner = fast.decode_batch
    fast.decode_batch = lambda reps, *a, **kw: (sizes.append(len(reps)), inner(reps, *a, **kw))[1]
    assert warm_up_compiled(fast, max_batch=4) > 0
    assert sizes == [1, 4] and fast.steps == STEPS


def test_a_decoder_on_the_gpu_it_runs_on_is_not_moved():
    """"cuda" and "cuda:0" name one GPU: a one-film worker's decoder keeps its FP8 (no CUDA here:
    only the comparison is checked)."""
    import torch

    from inference.decoder.speed import _same_device

    assert _same_device(torch.device("cuda"), torch.device("cuda:0"))
    assert _same_device(torch.device("cpu"), torch.device("cpu"))
    assert not _same_device(torch.device("cuda:1"), torch.device("cuda:0"))
    assert not _same_device(torch.device("cuda"), torch.device("cpu"))
