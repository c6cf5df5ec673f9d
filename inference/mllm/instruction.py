"""Instruction text -> token ids, with no way for user text to produce a special or added token.

The released code tokenizes the whole prompt string (`<TURN>` + instruction + markup), so a player
who types `<frame_00001>`, `<TURN>` or `<Strength_5>` gets those ids. Here the instruction alone is
run through the base SentencePiece/BPE pipeline with the added vocabulary removed, so such text is
spelled out as ordinary pieces (`<`, `TURN`, `>`), and the result is checked against the reserved
ids anyway. The game's sanitiser also strips markup, but this layer does not rely on it.

Token-exactness with the release: there the instruction follows `<TURN>`, and a non-legacy Llama
tokenizer adds no word-boundary marker after an added token, so the text is tokenized without the
dummy prefix space (`Character` -> `Character`, not `▁Character`). The plain pipeline is built the
same way (Metaspace prepend disabled, or a `Prepend("▁")` normalizer removed in older
tokenizer.json files).
"""

from __future__ import annotations

import json

from tokenizers import Tokenizer

from .tokens import BASE_VOCAB, SpecialIds


class InstructionEncoder:
    def __init__(self, hf_tokenizer, special: SpecialIds):
        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise TypeError("the tokenizer has no `tokenizers` backend (load it with transformers' AutoTokenizer)")
        spec = json.loads(backend.to_str())
        spec["added_tokens"] = []  # no added or special token is matched inside user text
        spec["post_processor"] = None  # no BOS/EOS
        spec["truncation"] = spec["padding"] = None
        spec["pre_tokenizer"] = _without_prepend(spec.get("pre_tokenizer"))
        spec["normalizer"] = _without_prepend(spec.get("normalizer"))
        self._plain = Tokenizer.from_str(json.dumps(spec))
        self._reserved = special.reserved

    def encode(self, text: str) -> list[int]:
        ids = self._plain.encode(text, add_special_tokens=False).ids
        bad = sorted({i for i in ids if i >= BASE_VOCAB or i in self._reserved})
        if bad:  # cannot happen with a well-formed base vocabulary; never pass such ids on
            raise ValueError(f"instruction text produced reserved token ids {bad[:10]}")
        return ids


def _without_prepend(node):
    """Drop the leading word-boundary marker from a pre-tokenizer or normalizer spec."""
    if node is None:
        return None
    kind = node.get("type")
    if kind == "Metaspace":
        node = {**node, "prepend_scheme": "never"}
        if "add_prefix_space" in node:  # older serialisations
            node["add_prefix_space"] = False
        return node
    if kind == "Prepend":
        return None
    if kind == "Sequence":
        key = "pretokenizers" if "pretokenizers" in node else "normalizers"
        parts = [p for p in (_without_prepend(n) for n in node[key]) if p is not None]
        return {**node, key: parts}
    return node
