"""A tiny random CLIP folder in transformers' layout, built offline: the model (CLIPConfig with
small towers), a byte-level BPE tokenizer with no merges (one token per character) and a 64 px
image processor, saved together as CLIPProcessor does."""

from __future__ import annotations

import json
from pathlib import Path

import torch


def _byte_chars() -> list[str]:
    """GPT-2's byte-to-unicode table, which CLIP's tokenizer reads its vocabulary in."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    codes, extra = keep[:], 0
    for b in range(256):
        if b not in keep:
            codes.append(256 + extra)
            extra += 1
    return [chr(c) for c in codes]


def build_clip(folder: Path, seed: int = 0) -> Path:
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    chars = _byte_chars()
    vocab = {t: i for i, t in enumerate(chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"])}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    images = CLIPImageProcessor(size={"shortest_edge": 64}, crop_size={"height": 64, "width": 64})
    CLIPProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(str(folder))
    torch.manual_seed(seed)
    config = CLIPConfig(
        text_config={"vocab_size": len(vocab), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 77,
                     "bos_token_id": vocab["<|startoftext|>"], "eos_token_id": vocab["<|endoftext|>"]},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "image_size": 64, "patch_size": 16},
        projection_dim=16,
    )
    CLIPModel(config).save_pretrained(str(folder))
    return folder
