"""Loading the agent checkpoint: released key names, exact key accounting, clear errors, merge."""

from __future__ import annotations

import pytest
import torch

from inference.mllm.loading import CheckpointError, load_mllm
from inference.mllm.tokens import TokenizerMismatch
from testkit.tiny import mllm as tiny

# The key shapes of the released agent checkpoint, literally.
RELEASED_KEYS = [
    "llm.base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
    "llm.base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight",
    "llm.base_model.model.model.layers.0.input_layernorm.modules_to_save.default.weight",
    "llm.base_model.model.model.embed_tokens.weight",
    "llm.base_model.model.lm_head.weight",
    "input_resampler.proj.0.weight", "input_resampler.proj.2.bias",
    "output_resampler.proj.0.weight", "output_resampler.proj.2.bias",
]


def load(files, agent, **kw):
    return load_mllm(files["mistral"], files["tokenizer"], agent, device="cpu", **kw)


def test_peft_writes_the_released_key_names(files):
    sd = files["state_dict"]
    for k in RELEASED_KEYS:
        assert k in sd, k
    assert sd["llm.base_model.model.model.embed_tokens.weight"].shape == (32284, 64)
    assert sd["input_resampler.proj.0.weight"].shape == (64, 1920)
    assert sd["output_resampler.proj.2.weight"].shape == (1920, 1920)
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        assert f"llm.base_model.model.model.layers.1.self_attn.{proj}.lora_B.default.weight" in sd
    for proj in ("gate_proj", "up_proj", "down_proj"):
        assert f"llm.base_model.model.model.layers.1.mlp.{proj}.lora_A.default.weight" in sd
    assert "llm.base_model.model.model.norm.modules_to_save.default.weight" in sd


@pytest.mark.parametrize("suffix", [".bin", ".safetensors"])
def test_released_checkpoint_loads_exactly(files, tmp_path, suffix):
    path = tiny.write_checkpoint(files["state_dict"], tmp_path / f"agent{suffix}")
    m = load(files, path, merge=False)
    r = m.report
    assert r.loaded == len(files["state_dict"]) and r.renamed == {} and r.ignored == [] and r.leftovers == []
    got = m.model.state_dict()
    for k, v in files["state_dict"].items():
        assert torch.equal(got[k], v), k


def test_trainable_only_checkpoint_lists_leftovers(files, tmp_path):
    sd = {k: v for k, v in files["state_dict"].items() if ".base_layer." not in k and ".original_module." not in k}
    m = load(files, tiny.write_checkpoint(sd, tmp_path / "trainable.bin"))
    r = m.report
    assert r.loaded == len(sd)
    assert len(r.leftovers) == 2 * 7 + 2 * 2 + 1  # 7 base weights and 2 norms per layer, final norm
    assert all(".base_layer." in k or ".original_module." in k for k in r.leftovers)
    assert "optional model keys" in r.summary()


def test_known_variants_are_mapped(files, tmp_path):
    # peft < 0.7 stored the frozen weight on the LoRA layer itself; DeepSpeed prefixes "module.";
    # older transformers saved rotary buffers.
    sd = {}
    for k, v in files["state_dict"].items():
        k = k.replace(".q_proj.base_layer.weight", ".q_proj.weight")
        sd["module." + k] = v
    sd["module.llm.base_model.model.model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(8)
    m = load(files, tiny.write_checkpoint(sd, tmp_path / "old.bin"), merge=False)
    r = m.report
    assert r.loaded == len(files["state_dict"])
    assert r.renamed == {"DeepSpeed/DDP wrapper prefix": len(files["state_dict"]),
                         "peft < 0.7 kept the frozen base weight on the LoRA layer itself": 2}
    assert r.ignored == ["module.llm.base_model.model.model.layers.0.self_attn.rotary_emb.inv_freq"]


def test_unexpected_key_is_an_error(files, tmp_path):
    sd = dict(files["state_dict"])
    sd["llm.base_model.model.model.layers.0.self_attn.q_proj.lora_C.default.weight"] = torch.zeros(1)
    with pytest.raises(CheckpointError, match=r"1 unexpected keys, e.g. .*q_proj\.lora_C"):
        load(files, tiny.write_checkpoint(sd, tmp_path / "extra.bin"))


def test_missing_trained_key_is_an_error(files, tmp_path):
    sd = {k: v for k, v in files["state_dict"].items() if "layers.1.mlp.down_proj.lora_B" not in k}
    with pytest.raises(CheckpointError, match=r"1 required keys missing, e.g. .*layers\.1\.mlp\.down_proj\.lora_B"):
        load(files, tiny.write_checkpoint(sd, tmp_path / "missing.bin"))


def test_checkpoint_of_another_model_is_an_error(files, tmp_path):
    other = tmp_path / "mistral-wide"
    tiny.build_mistral(other, hidden_size=32, intermediate_size=64)
    sd = tiny.released_state_dict(other)
    with pytest.raises(CheckpointError, match=r"not an AnimeGamer agent checkpoint for this base model \(hidden size 64.*wrong shape"):
        load(files, tiny.write_checkpoint(sd, tmp_path / "wide.safetensors"))


@pytest.mark.parametrize("suffix", [".bin", ".safetensors"])
def test_corrupted_checkpoint_is_an_error(files, tmp_path, suffix):
    good = tiny.write_checkpoint(files["state_dict"], tmp_path / f"good{suffix}")
    bad = tmp_path / f"truncated{suffix}"
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="cannot read the agent checkpoint"):
        load(files, bad)


def test_wrong_tokenizer_is_an_error(files, tmp_path):
    from transformers import LlamaTokenizer

    vocab, merges = tiny.tiny_vocab()
    LlamaTokenizer(vocab=vocab, merges=merges).save_pretrained(str(tmp_path / "plain-mistral-tokenizer"))
    with pytest.raises(TokenizerMismatch):
        load_mllm(files["mistral"], tmp_path / "plain-mistral-tokenizer", files["agent"], device="cpu")


def test_merge_folds_lora_and_trained_norms(files, loaded):
    sd = files["state_dict"]
    pre = "llm.base_model.model.model.layers.1."
    base = sd[pre + "self_attn.v_proj.base_layer.weight"]
    a, b = sd[pre + "self_attn.v_proj.lora_A.default.weight"], sd[pre + "self_attn.v_proj.lora_B.default.weight"]
    merged = loaded.model.llm.state_dict()
    # alpha / r = 32 / 32 = 1
    torch.testing.assert_close(merged["model.layers.1.self_attn.v_proj.weight"], base + b @ a)
    assert torch.equal(merged["model.layers.1.input_layernorm.weight"], sd[pre + "input_layernorm.modules_to_save.default.weight"])
    assert torch.equal(merged["lm_head.weight"], sd["llm.base_model.model.lm_head.weight"])
    assert type(loaded.model.llm).__name__ == "MistralForCausalLM"
    assert loaded.model.dtype == torch.float32  # CPU default


def test_dtype_is_a_setting(files):
    m = load(files, files["agent"], dtype="bf16")
    assert m.model.dtype == torch.bfloat16
    assert m.model.output_resampler.proj[0].weight.dtype == torch.bfloat16
