"""The GPU dtype stays faithful: a bf16 load keeps the rotary `inv_freq` in fp32 (as the released
code computes its rotation angles), on a tiny model with Mistral's head_dim of 128."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inference.mllm.instruction import InstructionEncoder
from inference.mllm.loading import FP32_BUFFERS, cast_keeping_fp32_buffers, load_mllm
from inference.mllm.predict import MLLMPredictor
from inference.mllm.prompt import PromptBuilder
from testkit.tiny import mllm as tiny
from tests.mllm.mllm_helpers import history, instruction

HEAD_DIM_128 = dict(hidden_size=256, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1)


@pytest.fixture(scope="module")
def files_128(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-head-dim-128")
    tiny.build_tokenizer(d / "tokenizer")
    tiny.build_mistral(d / "mistral", **HEAD_DIM_128)
    agent = tiny.write_checkpoint(tiny.released_state_dict(d / "mistral"), d / "agent.safetensors")
    return d / "mistral", d / "tokenizer", agent


@pytest.fixture(scope="module")
def loads(files_128):
    return {dt: load_mllm(*files_128, device="cpu", dtype=dt) for dt in ("fp32", "bf16")}


def _rotary(loaded):
    return loaded.model.causal_lm.model.rotary_emb


def test_bf16_load_keeps_inv_freq_in_fp32(loads):
    fp32, bf16 = _rotary(loads["fp32"]), _rotary(loads["bf16"])
    assert loads["bf16"].model.dtype == torch.bfloat16
    assert fp32.inv_freq.shape == (64,)  # head_dim 128
    for name in ("inv_freq", "original_inv_freq"):
        assert getattr(bf16, name).dtype == torch.float32, name
        assert torch.equal(getattr(bf16, name), getattr(fp32, name)), name


def test_rounded_inv_freq_would_move_the_angles_that_the_fp32_one_keeps(loads):
    """Why it matters: cos/sin at long positions, from fp32 angles vs bf16-rounded inv_freq."""
    rotary = _rotary(loads["bf16"])
    x = torch.zeros(1, dtype=torch.bfloat16)
    pos = torch.arange(2048)[None]
    cos, sin = rotary(x, pos)
    exact = pos[0, :, None].double() * rotary.inv_freq.double()
    assert (cos[0].double() - exact.cos().repeat(1, 2)).abs().max() < 1e-2  # only cos/sin are rounded
    rounded = pos[0, :, None].double() * rotary.inv_freq.bfloat16().double()
    assert (rounded - exact).abs().max() > 1.0  # radians: what a plain .to(bf16) would have done
    # ...and a plain .to(bf16) does round it, which is why the loader casts through the helper.
    probe = torch.nn.Module()
    probe.rotary = type(rotary)(loads["fp32"].model.config)
    assert probe.rotary.to(torch.bfloat16).inv_freq.dtype == torch.bfloat16
    probe.rotary = type(rotary)(loads["fp32"].model.config)
    assert cast_keeping_fp32_buffers(probe, "cpu", torch.bfloat16).rotary.inv_freq.dtype == torch.float32
    assert FP32_BUFFERS.search("llm.model.rotary_emb.original_inv_freq")


def test_bf16_representations_stay_within_bf16_error_of_fp32(loads):
    """At ~1,550 positions (five history turns) the bf16 representation is as close to the fp32 one
    as at ~250 (no history): rotation angles add no error beyond the weights' rounding."""
    errors = {}
    for window in (0, 5):
        reps = {}
        for dt, loaded in loads.items():
            builder = PromptBuilder(InstructionEncoder(loaded.tokenizer, loaded.special), loaded.special, window)
            prompt = builder.build(instruction(0), history(window))
            reps[dt] = MLLMPredictor(loaded.model, loaded.special).predict(prompt).representation
        errors[window] = np.linalg.norm(reps["bf16"] - reps["fp32"]) / np.linalg.norm(reps["fp32"])
    assert errors[0] < 0.02  # bf16 keeps 8 bits of mantissa: ~0.4 % per rounding, a few layers deep
    assert errors[5] < 2 * errors[0] + 1e-3
