"""8-bit and 4-bit MLLM weights through torchao, on the tiny model: the code path runs (4-bit with
the same `WeightOnlyInt4Linear` a GPU runs, on the CPU's int4 kernel) and stays close to the
unquantised model, by a deviation stated here."""

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
    with pytest.raises(ValueError, match="quantize must be None or one of"):
        load_mllm(files["mistral"], files["tokenizer"], files["agent"], device="cpu", quantize="int3")


@pytest.mark.parametrize("staged", [False, True])
def test_int4_weights_against_bf16(files, make_builder, staged):
    """The deviation of 4-bit weights from bf16 on the tiny model (history window 2, four prompts):
    the representation within 12 % (relative L2; measured 4.8 %), and the four states: every state
    within one unit, at least 13 of the 16 exact (measured: all 16)."""
    from inference.mllm.prompt import HistoryItem
    from inference.mllm.quantize import is_int4

    bf16 = load_mllm(files["mistral"], files["tokenizer"], files["agent"], device="cpu", dtype="bfloat16")
    q = load_mllm(files["mistral"], files["tokenizer"], files["agent"], device="cpu", dtype="bfloat16",
                  quantize="int4", staged=staged)
    layer = q.model.causal_lm.model.layers[0]
    assert is_int4(layer.self_attn.q_proj) and is_int4(layer.mlp.down_proj)
    assert not is_int4(q.model.causal_lm.lm_head)  # 32,284 rows: kept in bf16
    builder = make_builder(2)
    rng = np.random.default_rng(0)
    rels, exact, close = [], 0, 0
    for k in range(4):
        history = [HistoryItem(instruction(j), (1, 0, -1, 2), rng.standard_normal((226, q.model.rep_dim)).astype(np.float32))
                   for j in range(2)]
        prompt = builder.build(instruction(k), history)
        a = MLLMPredictor(bf16.model, bf16.special).predict(prompt)
        b = MLLMPredictor(q.model, q.special).predict(prompt)
        rels.append(np.linalg.norm(b.representation - a.representation) / np.linalg.norm(a.representation))
        exact += sum(x == y for x, y in zip(a.values, b.values, strict=True))
        close += sum(abs(x - y) <= 1 for x, y in zip(a.values, b.values, strict=True))
    print(f"int4 vs bf16: representation {max(rels):.3f} (max relative L2), states exact {exact}/16")
    assert max(rels) < 0.12, rels
    assert close == 16 and exact >= 13, (exact, close)
