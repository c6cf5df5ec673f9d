"""8-bit MLLM weights (the 24 GB mode) through torchao, on the tiny model: the code path runs and
stays close to the unquantised model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torchao", reason="8-bit MLLM weights need torchao (the project's models extra)")

from mllm_helpers import instruction  # noqa: E402

from inference.mllm.loading import load_mllm  # noqa: E402
from inference.mllm.predict import MLLMPredictor  # noqa: E402


def test_int8_weights_load_and_predict_close_to_full_precision(files, loaded, make_builder):
    q = load_mllm(files["mistral"], files["tokenizer"], files["agent"], device="cpu", quantize="int8")
    weight = q.model.causal_lm.model.layers[0].self_attn.q_proj.weight
    # torchao's int8 tensor subclass (its class name differs between torchao releases)
    assert type(weight).__module__.startswith("torchao") and type(weight) is not torch.nn.Parameter
    prompt = make_builder(0).build(instruction(0), [])
    full = MLLMPredictor(loaded.model, loaded.special).predict(prompt)
    int8 = MLLMPredictor(q.model, q.special).predict(prompt)
    rel = np.linalg.norm(int8.representation - full.representation) / np.linalg.norm(full.representation)
    assert rel < 0.05, rel


def test_unknown_quantisation_is_refused_before_loading(files):
    with pytest.raises(ValueError, match="quantize must be None or 'int8'"):
        load_mllm(files["mistral"], files["tokenizer"], files["agent"], device="cpu", quantize="int4")
