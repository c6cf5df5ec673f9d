"""The unconditional branch: one constant 226 x D tensor built from the checkpoint's projections.

The released decoder computes its unconditional tokens from a zeroed T5 text embedding (30 tokens
of 4096) and a zeroed CLIP image embedding (196 tokens of 768):

    cat( txt_mix_layer_norm(text_proj(0)),  ip_mix_layer_norm(ip_proj(0)) )     # (30 + 196, D)

with text_proj / ip_proj = Linear, GELU (exact), Linear and LayerNorms of eps 1e-5 (torch's
default, as built by the release). Inputs are zeros, so this is a constant: no T5 or CLIP needed.
The release evaluates it in fp16 at every step; we evaluate it once in fp32.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

UNCOND_TEXT_TOKENS = 30  # FrozenT5Embedder(is_plan_3=True) pads to 30 tokens
UNCOND_IP_TOKENS = 196  # FrozenOpenCLIPImageEmbedder_196
MIX_NORM_EPS = 1e-5

# The SAT patch-embedding mixin, under which the released checkpoint keeps these tensors (after the
# DiT prefix model.diffusion_model.). The names below are relative to it; they are also the state
# dict keys of training.encoder.RepresentationEncoder, which trains them.
PATCH_EMBED_PREFIX = "mixins.patch_embed."
UNCOND_SOURCE_KEYS = tuple(
    f"{module}.{param}"
    for module in (
        "text_proj.0",
        "text_proj.2",
        "ip_proj.0",
        "ip_proj.2",
        "txt_mix_layer_norm",
        "ip_mix_layer_norm",
    )
    for param in ("weight", "bias")
)


def _projection(x: torch.Tensor, p: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    h = F.linear(x, p[f"{name}.0.weight"].float(), p[f"{name}.0.bias"].float())
    return F.linear(F.gelu(h), p[f"{name}.2.weight"].float(), p[f"{name}.2.bias"].float())


def _norm(x: torch.Tensor, p: Mapping[str, torch.Tensor], name: str) -> torch.Tensor:
    w, b = p[f"{name}.weight"].float(), p[f"{name}.bias"].float()
    return F.layer_norm(x, w.shape, w, b, MIX_NORM_EPS)


def build_uncond_embedding(
    params: Mapping[str, torch.Tensor],
    text_tokens: int = UNCOND_TEXT_TOKENS,
    ip_tokens: int = UNCOND_IP_TOKENS,
) -> torch.Tensor:
    """(text_tokens + ip_tokens, D) float32 from the tensors named in UNCOND_SOURCE_KEYS."""
    missing = [k for k in UNCOND_SOURCE_KEYS if k not in params]
    if missing:
        raise KeyError(f"checkpoint lacks the unconditional-branch tensors: {missing}")
    text_in = params["text_proj.0.weight"].shape[1]
    ip_in = params["ip_proj.0.weight"].shape[1]
    with torch.no_grad():
        text = _norm(_projection(torch.zeros(text_tokens, text_in), params, "text_proj"), params, "txt_mix_layer_norm")
        ip = _norm(_projection(torch.zeros(ip_tokens, ip_in), params, "ip_proj"), params, "ip_mix_layer_norm")
    return torch.cat([text, ip], dim=0).contiguous()
