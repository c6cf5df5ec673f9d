"""The representation encoder of training phase (a): T5 text features and the first frame's CLIP
image tokens -> the 226 x 1920 shot representation the decoder is conditioned on.

    cat( txt_mix_layer_norm(text_proj(text[:30])),  ip_mix_layer_norm(ip_proj(image)) )   # (30 + 196, D)

text_proj / ip_proj are Linear, exact GELU, Linear; the norms LayerNorms of eps 1e-5: the released
decoder's patch-embedding mixin, whose tensors sit in the SAT checkpoint under
`model.diffusion_model.mixins.patch_embed.` with the names of inference.decoder.uncond
(`UNCOND_SOURCE_KEYS`). This module's state dict keys are exactly those names, so the converter's
`build_uncond_embedding` reads a trained encoder as it reads the released checkpoint, and the
encoder's output for zero inputs is the decoder's stored `uncond_embedding` (the unconditional
branch of classifier-free guidance).

The released T5 embedder pads the text to 30 tokens (UNCOND_TEXT_TOKENS), as film.features stores
it; longer text features (CogVideoX's 226) are cut to their first 30 (`text_tokens`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from inference.decoder.convert_checkpoints import DIT_PREFIX, ConversionError, load_state_dict, resolve_sat_checkpoint
from inference.decoder.uncond import (
    MIX_NORM_EPS,
    PATCH_EMBED_PREFIX,
    UNCOND_IP_TOKENS,
    UNCOND_SOURCE_KEYS,
    UNCOND_TEXT_TOKENS,
    build_uncond_embedding,
)

T5_WIDTH = 4096  # t5-v1_1-xxl
CLIP_WIDTH = 768  # open_clip ViT-B-16 patch tokens
REPRESENTATION_WIDTH = 1920  # the CogVideoX-2B DiT's width
ENCODER_FILE = "encoder.safetensors"
SAT_ENCODER_PREFIX = DIT_PREFIX + PATCH_EMBED_PREFIX


class EncoderError(ValueError):
    """An encoder file or checkpoint that cannot be read as this encoder (the message says why)."""


def _projection(inp: int, width: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, width), nn.GELU(approximate="none"), nn.Linear(width, width))


class RepresentationEncoder(nn.Module):
    """T5 text (B, >=30, text_dim) + CLIP image tokens (B, 196, image_dim) -> (B, 226, width)."""

    def __init__(
        self,
        text_dim: int = T5_WIDTH,
        image_dim: int = CLIP_WIDTH,
        width: int = REPRESENTATION_WIDTH,
        text_tokens: int = UNCOND_TEXT_TOKENS,
        image_tokens: int = UNCOND_IP_TOKENS,
    ):
        super().__init__()
        self.text_tokens = text_tokens
        self.image_tokens = image_tokens
        self.text_proj = _projection(text_dim, width)
        self.ip_proj = _projection(image_dim, width)
        self.txt_mix_layer_norm = nn.LayerNorm(width, eps=MIX_NORM_EPS)
        self.ip_mix_layer_norm = nn.LayerNorm(width, eps=MIX_NORM_EPS)

    @property
    def dims(self) -> dict[str, int]:
        first_text, first_ip = self.text_proj[0], self.ip_proj[0]
        assert isinstance(first_text, nn.Linear) and isinstance(first_ip, nn.Linear)
        return {
            "text_dim": first_text.in_features,
            "image_dim": first_ip.in_features,
            "width": first_text.out_features,
            "text_tokens": self.text_tokens,
            "image_tokens": self.image_tokens,
        }

    def forward(self, text: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        if text.shape[-2] < self.text_tokens:
            raise ValueError(f"text features have {text.shape[-2]} tokens, the encoder takes {self.text_tokens}")
        if image.shape[-2] != self.image_tokens:
            raise ValueError(f"image features have {image.shape[-2]} tokens, the encoder takes {self.image_tokens}")
        dtype = self.txt_mix_layer_norm.weight.dtype
        t = self.txt_mix_layer_norm(self.text_proj(text[..., : self.text_tokens, :].to(dtype)))
        i = self.ip_mix_layer_norm(self.ip_proj(image.to(dtype)))
        return torch.cat([t, i], dim=-2)

    def uncond_embedding(self) -> torch.Tensor:
        """(226, width) float32: the decoder's unconditional tokens, computed by the converter's own
        function from this encoder's weights (what the exported decoder stores)."""
        params = {k: v.detach().cpu() for k, v in self.state_dict().items()}
        return build_uncond_embedding(params, self.text_tokens, self.image_tokens)

    # -- files ------------------------------------------------------------------------------

    @classmethod
    def from_state_dict(cls, params: Mapping[str, torch.Tensor], **tokens: int) -> RepresentationEncoder:
        """From tensors named as UNCOND_SOURCE_KEYS (dims read from their shapes)."""
        missing = [k for k in UNCOND_SOURCE_KEYS if k not in params]
        if missing:
            raise EncoderError(f"the encoder's tensors are missing: {missing}")
        w = params["text_proj.0.weight"]
        encoder = cls(int(w.shape[1]), int(params["ip_proj.0.weight"].shape[1]), int(w.shape[0]), **tokens)
        own = encoder.state_dict()
        wrong = [f"{k} {tuple(params[k].shape)} != {tuple(v.shape)}" for k, v in own.items() if params[k].shape != v.shape]
        if wrong:
            raise EncoderError(f"encoder tensors of the wrong shape: {wrong}")
        encoder.load_state_dict({k: params[k].float() for k in own}, strict=True)
        return encoder

    @classmethod
    def from_sat_checkpoint(cls, src: str | Path, trust_pickle: bool = False) -> RepresentationEncoder:
        """The released phase-(a) encoder from a SAT decoder directory (or its model-states file):
        only the patch-embedding tensors the converter folds into `uncond_embedding` are read."""
        try:
            sat = load_state_dict(resolve_sat_checkpoint(str(src)), trust_pickle)
        except ConversionError as e:
            raise EncoderError(str(e)) from None
        if any(k.startswith(SAT_ENCODER_PREFIX + "mix_proj.") for k in sat):
            raise EncoderError(f"{src}: has mix_proj (a non-768 image branch), which neither the converter nor "
                               "this encoder supports")
        return cls.from_state_dict({k: sat[SAT_ENCODER_PREFIX + k] for k in UNCOND_SOURCE_KEYS
                                    if SAT_ENCODER_PREFIX + k in sat})

    def save(self, path: str | Path) -> Path:
        """safetensors under the SAT patch-embedding names, with the token counts in its metadata."""
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().float().cpu().contiguous() for k, v in self.state_dict().items()}
        meta = {"format": "animegamer-encoder/1", "text_tokens": self.text_tokens, "image_tokens": self.image_tokens}
        save_file(tensors, str(path), metadata={"animegamer": json.dumps(meta)})
        return path

    @classmethod
    def load(cls, path: str | Path) -> RepresentationEncoder:
        """A file written by `save`, a folder holding one, or a SAT decoder checkpoint."""
        from safetensors import safe_open

        path = Path(path)
        if path.is_dir() and (path / ENCODER_FILE).is_file():
            path = path / ENCODER_FILE
        if path.suffix != ".safetensors":
            return cls.from_sat_checkpoint(path)
        if not path.is_file():
            raise EncoderError(f"{path}: no such encoder file")
        with safe_open(str(path), framework="pt") as f:
            meta: dict[str, Any] = json.loads((f.metadata() or {}).get("animegamer", "{}"))
            params = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a Mapping)
        tokens = {k: int(meta[k]) for k in ("text_tokens", "image_tokens") if k in meta}
        return cls.from_state_dict(params, **tokens)
