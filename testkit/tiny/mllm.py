"""Tiny random stand-ins for the released files, for tests and the CPU benchmark.

Nothing here is downloaded; everything is written to a directory in the released layouts so the
real loading code reads it:

- tokenizer: transformers' LlamaTokenizer (the class that the released `tokenizer.model` loads
  as) built from a small hand-made BPE vocabulary laid out like Mistral's: `<unk>`, `<s>`, `</s>`
  at 0..2, byte-fallback pieces `<0x00>`..`<0xFF>` at 3..258, characters and whole-word merges of
  a small game vocabulary, then unreachable filler pieces up to id 31999; then the 284 AnimeGamer
  tokens added in id order with the released flags (frame and strength tokens non-special and
  normalized, the markup tokens special), giving ids 32000..32283.
- Mistral: a random MistralForCausalLM (hidden 64, 2 layers, 4 heads, 2 kv heads, vocab 32000),
  saved with `save_pretrained`.
- agent checkpoint: built the way the release built its model (peft `get_peft_model` with the
  released LoRA config around the resized Mistral, inside a module with attributes `llm`,
  `input_resampler.proj`, `output_resampler.proj`), with every tensor randomised (LoRA B included,
  so the LoRA changes outputs), saved as `pytorch_model.bin` or `.safetensors`.
"""

from __future__ import annotations

import string
from pathlib import Path

import torch
from torch import nn

from inference.mllm.model import MISTRAL_7B_SHAPE as _MISTRAL_7B_SHAPE
from inference.mllm.tokens import BASE_VOCAB, VOCAB_SIZE, add_animegamer_tokens

WORDS = ["Character", "Motion", "Background", "Qiqi", "Jiji", "Ponyo", "Sosuke", "quickly", "slowly", "happily", "fly", "run", "walk", "jump", "eat", "sleep", "read", "swim", "play", "on", "the", "a", "broomstick", "night", "sky", "morning", "forest", "sea", "town", "street", "house", "room"]


def tiny_vocab() -> tuple[dict[str, int], list[tuple[str, str]]]:
    vocab: dict[str, int] = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for ch in "▁" + string.ascii_letters + string.digits + string.punctuation:
        vocab.setdefault(ch, len(vocab))
    merges: list[tuple[str, str]] = []
    for word in WORDS:  # left-to-right merge chains: "▁f"+"l" -> "▁fl", ... and the same without "▁"
        for w in ("▁" + word, word):
            piece = w[0]
            for ch in w[1:]:
                if piece + ch not in vocab:
                    vocab[piece + ch] = len(vocab)
                    merges.append((piece, ch))
                piece += ch
    while len(vocab) < BASE_VOCAB:  # never produced: no merge leads to them
        vocab[f"<filler_{len(vocab):05d}>"] = len(vocab)
    return vocab, merges


def build_tokenizer(directory: str | Path):
    """Write a tiny AnimeGamer-compatible tokenizer to `directory` and return it."""
    from transformers import LlamaTokenizer

    vocab, merges = tiny_vocab()
    tok = LlamaTokenizer(vocab=vocab, merges=merges, legacy=False, add_prefix_space=None)
    tok.pad_token = tok.unk_token
    add_animegamer_tokens(tok)
    assert len(tok) == VOCAB_SIZE
    tok.save_pretrained(str(directory))
    return tok


def tiny_config(**overrides):
    from transformers import MistralConfig

    kw = dict(
        vocab_size=BASE_VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        sliding_window=4096,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    )
    kw.update(overrides)
    return MistralConfig(**kw)


def build_mistral(directory: str | Path, seed: int = 0, **overrides):
    from transformers import MistralForCausalLM

    torch.manual_seed(seed)
    model = MistralForCausalLM(tiny_config(**overrides))
    model.save_pretrained(str(directory))
    return model


class _ReleasedProjection(nn.Module):  # MLLM/src/models/discrete_models.ProjectionLayer's layout
    def __init__(self, i: int, o: int):
        super().__init__()
        self.proj = nn.Sequential(nn.Linear(i, o), nn.GELU(), nn.Linear(o, o))


def released_state_dict(mistral_dir: str | Path, seed: int = 1, rep_dim: int = 1920) -> dict[str, torch.Tensor]:
    """State dict of a randomly trained model with the released object layout and peft naming."""
    from peft import LoraConfig, get_peft_model
    from transformers import MistralForCausalLM

    llm = MistralForCausalLM.from_pretrained(str(mistral_dir), dtype=torch.float32)
    llm.resize_token_embeddings(VOCAB_SIZE, mean_resizing=False)
    cfg = LoraConfig(
        r=32, lora_alpha=32, lora_dropout=0.05, task_type="CAUSAL_LM",
        target_modules=["q_proj", "v_proj", "k_proj", "o_proj", "gate_proj", "down_proj", "up_proj"],
        modules_to_save=["input_layernorm", "post_attention_layernorm", "norm"],
    )
    agent = nn.Module()
    agent.llm = get_peft_model(llm, cfg)
    hidden = llm.config.hidden_size
    agent.input_resampler = _ReleasedProjection(rep_dim, hidden)
    agent.output_resampler = _ReleasedProjection(hidden, rep_dim)
    g = torch.Generator().manual_seed(seed)
    sd = agent.state_dict()
    for k, v in sd.items():
        if ".base_layer." in k or ".original_module." in k:
            continue  # frozen: equal to the Mistral directory's weights
        scale = 0.02 if v.ndim > 1 else 0.1
        base = 1.0 if "norm" in k and v.ndim == 1 else 0.0
        sd[k] = base + scale * torch.randn(v.shape, generator=g)
    return {k: v.contiguous() for k, v in sd.items()}


def write_checkpoint(sd: dict[str, torch.Tensor], path: str | Path) -> Path:
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(sd, str(path))
    else:
        torch.save(sd, str(path))
    return path


def build_all(directory: str | Path, rep_dim: int = 1920) -> dict[str, Path]:
    """Tokenizer, Mistral and agent checkpoint (.bin) under `directory`; returns their paths."""
    d = Path(directory)
    paths = {"tokenizer": d / "tokenizer", "mistral": d / "mistral", "agent": d / "pytorch_model.bin"}
    build_tokenizer(paths["tokenizer"])
    build_mistral(paths["mistral"])
    write_checkpoint(released_state_dict(paths["mistral"], rep_dim=rep_dim), paths["agent"])
    return paths


MISTRAL_7B_SHAPE = _MISTRAL_7B_SHAPE  # the full size, defined once in inference.mllm.model


def random_mllm(device, dtype, rep_dim: int = 1920, seed: int = 0, **shape):
    """An AnimeGamerMLLM with random weights, LoRA merged away (plain weights), built on `device`.

    shape: MistralConfig fields (default: the tiny config; MISTRAL_7B_SHAPE for the full size).
    The rotary buffers stay fp32 as load_mllm keeps them."""
    from transformers import MistralForCausalLM

    from inference.mllm.loading import cast_keeping_fp32_buffers
    from inference.mllm.model import AnimeGamerMLLM

    torch.manual_seed(seed)
    cfg = tiny_config(**{"vocab_size": VOCAB_SIZE, **shape}, attn_implementation="sdpa")
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in the target dtype: a 7B in fp32 first would need 29 GB
    try:
        with torch.device(device):
            model = AnimeGamerMLLM(MistralForCausalLM(cfg), rep_dim)
    finally:
        torch.set_default_dtype(default)
    return cast_keeping_fp32_buffers(model, device, dtype).eval().requires_grad_(False)
