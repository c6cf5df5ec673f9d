"""Prediction against independent references: the released passes rebuilt with plain transformers
calls, cached against uncached decoding, batched against one by one, merged against unmerged LoRA."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mllm_helpers import history, instruction

from inference.mllm.loading import load_mllm
from inference.mllm.predict import MLLMPredictor, PredictOptions

STRENGTH = list(range(32262, 32273))
CLOSE, OPEN = [32275, 32277, 32279, 32281], [32274, 32276, 32278, 32280]


@pytest.fixture(scope="module")
def predictor(loaded):
    return MLLMPredictor(loaded.model, loaded.special)


@pytest.fixture(scope="module")
def prompts(make_builder):
    b = make_builder(3)
    return [b.build(instruction(0)), b.build(instruction(1), history(1, seed=1)), b.build(instruction(2), history(3, seed=2))]


def embeds_of(model, prompt):
    """Prompt embeddings with history slots replaced, written independently of predict.py."""
    with torch.no_grad():
        e = model.causal_lm.get_input_embeddings()(torch.tensor([prompt.input_ids]))
        for start, rep in zip(prompt.history_starts, prompt.history_reps, strict=True):
            e[0, start : start + 226] = model.input_resampler(torch.from_numpy(rep))
    return e


def released_bi_mask(n, q0, q1):
    """The released _make_causal_mask: causal, with the -1 block (the query tokens) all zeros."""
    m = torch.full((n, n), torch.finfo(torch.float32).min).triu(1)
    m[q0:q1, q0:q1] = 0
    return m[None, None]


def reference(model, prompt, state_pass, readout):
    """Released generate_bi for the representation; a greedy loop restricted to the strength ids
    for the states, with the model's own causal mask (released) or the bidirectional block."""
    llm = model.causal_lm
    e = embeds_of(model, prompt)
    n, q0, q1 = len(prompt), prompt.query_start, prompt.query_end
    with torch.no_grad():
        h = llm.model(inputs_embeds=e, attention_mask=released_bi_mask(n, q0, q1)).last_hidden_state
        rows = h[0, n - 226 :] if readout == "released" else h[0, q0:q1]
        rep = model.output_resampler(rows).numpy()
        values, logits = [], []
        for k in range(4):
            m = None if state_pass == "released_causal" else released_bi_mask(e.shape[1], q0, q1)
            last = llm(inputs_embeds=e, attention_mask=m).logits[0, -1, STRENGTH]
            logits.append(last.numpy())
            values.append(int(last.argmax()) - 5)
            if k < 3:
                fed = torch.tensor([[STRENGTH[values[-1] + 5], CLOSE[k], OPEN[k + 1]]])
                e = torch.cat([e, llm.get_input_embeddings()(fed)], dim=1)
    return rep, tuple(values), np.stack(logits)


def close(a, b, tol=2e-5):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "which,state_pass,readout",
    [(0, "training", "released"), (0, "released_causal", "query"),
     (2, "training", "query"), (2, "released_causal", "released")],
)
def test_matches_reference(loaded, predictor, prompts, readout, state_pass, which):
    p = prompts[which]
    out = predictor.predict(p, PredictOptions(readout=readout, state_pass=state_pass))
    rep, values, logits = reference(loaded.model, p, state_pass, readout)
    assert out.representation.shape == (226, 1920) and out.representation.dtype == np.float32
    close(out.representation, rep)
    close(out.state_logits, logits)
    assert out.values == values and all(-5 <= v <= 5 for v in values)


def test_readouts_differ_by_the_three_token_shift(predictor, prompts):
    released = predictor.predict(prompts[0], PredictOptions(readout="released")).representation
    query = predictor.predict(prompts[0], PredictOptions(readout="query")).representation
    close(released[:223], query[3:])  # same hidden rows, three positions apart
    assert not np.allclose(released, query)


def test_history_representations_are_read(predictor, make_builder):
    hist = history(2, seed=3)
    b = make_builder(2)
    a = predictor.predict(b.build(instruction(0), hist))
    hist[0] = type(hist[0])(hist[0].instruction, hist[0].values, hist[0].representation * 2)
    c = predictor.predict(b.build(instruction(0), hist))
    assert not np.allclose(a.representation, c.representation)


@pytest.mark.parametrize("state_pass", ["training", "released_causal"])
def test_cached_and_uncached_agree(predictor, prompts, state_pass):
    for p in prompts:
        cached = predictor.predict(p, PredictOptions(state_pass=state_pass, use_cache=True))
        full = predictor.predict(p, PredictOptions(state_pass=state_pass, use_cache=False))
        close(cached.representation, full.representation)
        close(cached.state_logits, full.state_logits)
        assert cached.values == full.values


@pytest.mark.parametrize("state_pass", ["training", "released_causal"])
def test_batched_and_one_by_one_agree(predictor, prompts, state_pass):
    opt = PredictOptions(state_pass=state_pass)
    assert len({len(p) for p in prompts}) == 3  # different lengths: rows are padded
    batched = predictor.predict_batch(prompts, opt)
    for p, got in zip(prompts, batched, strict=True):
        one = predictor.predict(p, opt)
        close(got.representation, one.representation)
        close(got.state_logits, one.state_logits)
        assert got.values == one.values


def test_merged_and_unmerged_lora_agree(files, loaded, prompts):
    unmerged = load_mllm(files["mistral"], files["tokenizer"], files["agent"], device="cpu", merge=False)
    assert type(unmerged.model.llm).__name__.startswith("Peft")
    a = MLLMPredictor(unmerged.model, unmerged.special).predict(prompts[2])
    b = MLLMPredictor(loaded.model, loaded.special).predict(prompts[2])
    close(a.representation, b.representation, tol=1e-4)
    close(a.state_logits, b.state_logits, tol=1e-4)
    assert a.values == b.values
    # and the LoRA matters: the base model alone gives other outputs
    with unmerged.model.llm.disable_adapter():
        base = MLLMPredictor(unmerged.model, unmerged.special).predict(prompts[2])
    assert not np.allclose(base.representation, a.representation, atol=1e-3)


def test_eager_and_sdpa_agree(files, loaded, prompts):
    eager = load_mllm(files["mistral"], files["tokenizer"], files["agent"], device="cpu", attn_implementation="eager")
    a = MLLMPredictor(eager.model, eager.special).predict_batch(prompts)
    b = MLLMPredictor(loaded.model, loaded.special).predict_batch(prompts)
    for x, y in zip(a, b, strict=True):
        close(x.representation, y.representation)
        assert x.values == y.values
