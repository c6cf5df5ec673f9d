"""The released DiT (SAT) -> AnimeGamerTransformer3DModel state dict, for the decoder converter
(inference.decoder.convert): the key map, the SAT LoRA merge (W + alpha/r B A, q/k/v split after
the merge), the adaLN chunks regrouped, the unconditional branch folded into one constant and the
position table checked against the one diffusers computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .convert_checkpoints import (
    DIT_PREFIX,
    CheckpointKindError,
    ConversionError,
    KeyAccount,
    describe_state_dict,
    require_tensors,
)
from .transformer import ANIMEGAMER_2B_CONFIG
from .uncond import PATCH_EMBED_PREFIX, UNCOND_SOURCE_KEYS, build_uncond_embedding

LORA_ALPHA = 1.0  # sat.model.finetune.lora2.LoraMixin default; scale = alpha / r = 1/64 for r = 64


def _merged_linear(
    sd: Mapping[str, torch.Tensor], base: str, partitions: int, lora_alpha: float
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Weight and bias of a SAT linear, with its LoRA (if any) merged: W + (alpha/r) cat_i(B_i A_i)."""
    if f"{base}.weight" in sd:
        return sd[f"{base}.weight"].float(), sd[f"{base}.bias"].float(), [f"{base}.weight", f"{base}.bias"]
    w_key, b_key = f"{base}.original.weight", f"{base}.original.bias"
    if w_key not in sd:
        raise ConversionError(f"missing {base}.weight (or its LoRA form {w_key})")
    a_keys = [f"{base}.matrix_A.{i}" for i in range(partitions)]
    b_keys = [f"{base}.matrix_B.{i}" for i in range(partitions)]
    missing = [k for k in a_keys + b_keys if k not in sd]
    if missing:
        raise ConversionError(f"incomplete LoRA for {base}: missing {missing}")
    extra = [k for k in sd if k.startswith(f"{base}.matrix_") and k not in a_keys + b_keys]
    if extra:
        raise ConversionError(f"unexpected LoRA partitions for {base}: {extra}")
    weight = sd[w_key].float()
    r = sd[a_keys[0]].shape[0]
    delta = torch.cat([sd[b].float() @ sd[a].float() for a, b in zip(a_keys, b_keys, strict=True)], dim=0)
    if delta.shape != weight.shape:
        raise ConversionError(f"LoRA of {base} has shape {tuple(delta.shape)}, weight {tuple(weight.shape)}")
    merged = weight + (lora_alpha / r) * delta
    return merged, sd[b_key].float(), [w_key, b_key, *a_keys, *b_keys]


# SAT name -> diffusers name, for the tensors that only move (weight and bias each).
TOP_LEVEL_RENAMES = {
    "time_embed.0": "time_embedding.linear_1",
    "time_embed.2": "time_embedding.linear_2",
    "flow_embed.0": "ofs_embedding.linear_1",
    "flow_embed.2": "ofs_embedding.linear_2",
    "mixins.patch_embed.proj": "patch_embed.proj",
    "transformer.final_layernorm": "norm_final",
    "mixins.final_layer.norm_final": "norm_out.norm",
    "mixins.final_layer.linear": "proj_out",
    "mixins.final_layer.adaLN_modulation.1": "norm_out.linear",
}
LAYER_RENAMES = (  # under transformer.layers.{i} / transformer_blocks.{i}
    ("input_layernorm", "norm1.norm"),
    ("post_attention_layernorm", "norm2.norm"),
    ("mlp.dense_h_to_4h", "ff.net.0.proj"),
    ("mlp.dense_4h_to_h", "ff.net.2"),
)


class _Conversion:
    """The DiT's keys (prefix stripped), the diffusers tensors made so far, and what each source
    key became (every key must be accounted for: nothing is dropped silently)."""

    def __init__(self, sd: dict[str, torch.Tensor], prefix: str) -> None:
        self.sd, self.prefix = sd, prefix
        self.out: dict[str, torch.Tensor] = {}
        self.used: dict[str, tuple[str, list[str], str]] = {}

    def take(self, src_keys: list[str], action: str, targets: list[str], note: str = "") -> None:
        for s in src_keys:
            self.used[s] = (action, targets, note)

    def require(self, src: str) -> torch.Tensor:
        if src not in self.sd:
            raise ConversionError(f"checkpoint lacks {self.prefix}{src}")
        return self.sd[src]

    def rename(self, src: str, dst: str) -> None:
        self.out[dst] = self.require(src)  # still memory-mapped; cast when written
        self.take([src], "renamed", [dst])

    def put(self, values: dict[str, torch.Tensor], srcs: list[str], action: str) -> None:
        self.out.update(values)
        self.take(srcs, action, list(values))


def convert_transformer_state_dict(
    sat: Mapping[str, torch.Tensor],
    config: Mapping[str, Any] = ANIMEGAMER_2B_CONFIG,
    lora_alpha: float = LORA_ALPHA,
    prefix: str = DIT_PREFIX,
) -> tuple[dict[str, torch.Tensor], KeyAccount]:
    """SAT state dict (full file; only `prefix` keys are read) -> diffusers state dict.

    Renamed tensors keep their stored dtype; merged and split ones are computed in float32.
    """
    account = KeyAccount()
    dit_keys = [k for k in sat if k.startswith(prefix)]
    if not dit_keys:
        raise CheckpointKindError(f"expected the SAT decoder checkpoint, got {describe_state_dict(list(sat))}")
    for k in sat:
        if not k.startswith(prefix):
            account.add(k, "skipped", note="not a DiT key (other sub-model of the SAT file)")
    sd = {k[len(prefix) :]: sat[k] for k in dit_keys}
    require_tensors(sd, "DiT")
    c = _Conversion(sd, prefix)
    for src, dst in TOP_LEVEL_RENAMES.items():
        for p in ("weight", "bias"):
            c.rename(f"{src}.{p}", f"{dst}.{p}")
    for i in range(config["num_layers"]):
        _convert_layer(c, i, lora_alpha)
    _fold_uncond(c)
    # Position table: must be diffusers' sincos table (text rows zero); diffusers recomputes it.
    pos_key = "mixins.pos_embed.pos_embedding"
    if pos_key in sd:
        c.take([pos_key], "checked", [], _check_pos_embedding(sd[pos_key], config))

    unaccounted = sorted(k for k in sd if k not in c.used)
    if unaccounted:
        raise ConversionError(
            f"{len(unaccounted)} DiT keys have no conversion rule (nothing is dropped silently): "
            f"{unaccounted[:20]}{' ...' if len(unaccounted) > 20 else ''}"
        )
    for k in dit_keys:
        action, targets, note = c.used[k[len(prefix) :]]
        account.add(k, action, targets, note)
    return c.out, account


def _convert_layer(c: _Conversion, i: int, lora_alpha: float) -> None:
    """One transformer block: norms and MLP renamed, attention LoRA-merged (q/k/v split), adaLN regrouped."""
    sat_l, dif_l = f"transformer.layers.{i}", f"transformer_blocks.{i}"
    for src, dst in LAYER_RENAMES:
        for p in ("weight", "bias"):
            c.rename(f"{sat_l}.{src}.{p}", f"{dif_l}.{dst}.{p}")
    for src, dst in (("query_layernorm_list", "norm_q"), ("key_layernorm_list", "norm_k")):
        for p in ("weight", "bias"):
            c.rename(f"mixins.adaln_layer.{src}.{i}.{p}", f"{dif_l}.attn1.{dst}.{p}")

    # Fused q/k/v (LoRA in three partitions) -> to_q, to_k, to_v.
    w, b, srcs = _merged_linear(c.sd, f"{sat_l}.attention.query_key_value", 3, lora_alpha)
    if w.shape[0] % 3 or b.shape[0] != w.shape[0]:  # chunk(3) would give unequal (or fewer) parts
        raise ConversionError(
            f"{c.prefix}{sat_l}.attention.query_key_value has {w.shape[0]} rows and a bias of {b.shape[0]}: "
            "not three equal q/k/v parts"
        )
    parts: dict[str, torch.Tensor] = {}
    for name, wi, bi in zip(("to_q", "to_k", "to_v"), w.chunk(3, 0), b.chunk(3, 0), strict=True):
        parts[f"{dif_l}.attn1.{name}.weight"], parts[f"{dif_l}.attn1.{name}.bias"] = wi, bi
    c.put(parts, srcs, "lora-merged+split" if len(srcs) > 2 else "split")
    w, b, srcs = _merged_linear(c.sd, f"{sat_l}.attention.dense", 1, lora_alpha)
    c.put({f"{dif_l}.attn1.to_out.0.weight": w, f"{dif_l}.attn1.to_out.0.bias": b}, srcs,
          "lora-merged" if len(srcs) > 2 else "renamed")

    # adaLN: 12 chunks (video msa shift/scale/gate, video mlp x3, text msa x3, text mlp x3);
    # diffusers' norm1 takes the msa six (video then text), norm2 the mlp six.
    for p in ("weight", "bias"):
        src = f"mixins.adaln_layer.adaLN_modulations.{i}.1.{p}"
        chunks = c.require(src).float().chunk(12, dim=0)
        c.put({f"{dif_l}.norm1.linear.{p}": torch.cat(chunks[0:3] + chunks[6:9]),
               f"{dif_l}.norm2.linear.{p}": torch.cat(chunks[3:6] + chunks[9:12])}, [src], "split")


def _fold_uncond(c: _Conversion) -> None:
    """The unconditional branch, folded into one constant."""
    pe = PATCH_EMBED_PREFIX
    uncond_params = {k: c.sd[pe + k] for k in UNCOND_SOURCE_KEYS if pe + k in c.sd}
    c.out["uncond_embedding"] = build_uncond_embedding(uncond_params)
    c.take([pe + k for k in UNCOND_SOURCE_KEYS], "folded", ["uncond_embedding"],
           "LN(text_proj(0)) ++ LN(ip_proj(0)): the constant unconditional tokens")
    for p in ("weight", "bias"):
        k = f"{pe}output_mix_layer_norm.{p}"
        if k in c.sd:
            c.take([k], "skipped", [], "unused by the released model (ip width 768: plain concatenation)")
    if any(k.startswith(pe + "mix_proj.") for k in c.sd):
        raise ConversionError("checkpoint has mix_proj (a variant with a non-768 image branch): not supported")


def _check_pos_embedding(stored: torch.Tensor, config: Mapping[str, Any]) -> str:
    from .diffusers_api import get_3d_sincos_pos_embed

    p = config["patch_size"]
    text = config["max_text_seq_length"]
    frames = (config["sample_frames"] - 1) // config["temporal_compression_ratio"] + 1
    ref = get_3d_sincos_pos_embed(
        config["num_attention_heads"] * config["attention_head_dim"],
        (config["sample_width"] // p, config["sample_height"] // p),
        frames,
        config.get("spatial_interpolation_scale", 1.875),
        config.get("temporal_interpolation_scale", 1.0),
        output_type="pt",
    ).flatten(0, 1)
    s = stored.float().reshape(-1, stored.shape[-1])
    if s.shape[0] < text + ref.shape[0] or s.shape[1] != ref.shape[1]:
        raise ConversionError(
            f"pos_embedding has shape {tuple(stored.shape)}; the config needs (1, {text + ref.shape[0]}, {ref.shape[1]})"
        )
    tol = 1e-4 if stored.dtype == torch.float32 else 2 * torch.finfo(stored.dtype).eps
    text_max = s[:text].abs().max().item()
    diff = (s[text : text + ref.shape[0]] - ref).abs().max().item()
    if text_max > 0 or diff > tol:
        raise ConversionError(
            f"pos_embedding differs from the sincos table diffusers computes (text rows max {text_max:g}, "
            f"video rows max diff {diff:g} > {tol:g}): this checkpoint's geometry is not the config's"
        )
    return f"equals diffusers' computed sincos table (max diff {diff:.2e}); text rows zero"

