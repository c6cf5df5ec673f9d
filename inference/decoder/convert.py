"""Released AnimeGamer decoder (SAT format) + CogVideoX 3D VAE -> diffusers/safetensors directories.

    animegamer convert-decoder SRC_DIR VAE_FILE OUT_DIR [--dtype fp16|bf16|fp32]

SRC_DIR is the SAT checkpoint directory (`latest` names the iteration; the weights are in
`<iteration>/mp_rank_00_model_states.pt`, a pickle `{'module': state_dict}`), or that .pt file.
The released file is ~26.6 GB and also carries sub-models the decoder does not need (T5, ...):
it is memory-mapped and only the DiT keys (`model.diffusion_model.*`) are read.

Every source key gets a fate in `conversion_account.json` (renamed, split, LoRA-merged, folded into
the unconditional embedding, checked, or skipped with the reason); a DiT or VAE key that no rule
covers is an error, never silently dropped. Output:

    OUT_DIR/transformer/{config.json, diffusion_pytorch_model.safetensors}  AnimeGamerTransformer3DModel
    OUT_DIR/vae/{config.json, diffusion_pytorch_model.safetensors}          AutoencoderKLCogVideoX
    OUT_DIR/decoder.json                                                    clip settings
    OUT_DIR/conversion_account.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from safetensors.torch import save_file

from .transformer import ANIMEGAMER_2B_CONFIG, AnimeGamerTransformer3DModel
from .uncond import UNCOND_SOURCE_KEYS, build_uncond_embedding
from .vae import COGVIDEOX_VAE_CONFIG

DIT_PREFIX = "model.diffusion_model."
SAT_WEIGHTS_NAME = "mp_rank_00_model_states.pt"
WEIGHTS_NAME = "diffusion_pytorch_model.safetensors"
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
LORA_ALPHA = 1.0  # sat.model.finetune.lora2.LoraMixin default; scale = alpha / r = 1/64 for r = 64

# Clip settings written next to the weights (the released inference config).
DECODER_SETTINGS = {"num_latent_frames": 5, "height": 480, "width": 720, "fps": 8}


class ConversionError(ValueError):
    """The inputs cannot be converted; the message says why."""


class CheckpointKindError(ConversionError):
    """A file of the wrong kind was given (e.g. the VAE where the decoder belongs)."""


@dataclass
class KeyAccount:
    """What happened to every source key."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, key: str, action: str, targets: Sequence[str] = (), note: str = "") -> None:
        if key in self.entries:
            raise AssertionError(f"key accounted twice: {key}")
        entry: dict[str, Any] = {"action": action}
        if targets:
            entry["targets"] = list(targets)
        if note:
            entry["note"] = note
        self.entries[key] = entry

    def summary(self) -> dict[str, int]:
        return dict(Counter(e["action"] for e in self.entries.values()))

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary(), "keys": self.entries}


# ---------------------------------------------------------------------------------------------
# Reading checkpoints


def _describe(keys: Sequence[str]) -> str:
    """Guess what a state dict is, for error messages."""
    ks = list(keys)
    if any(k.startswith(DIT_PREFIX) for k in ks):
        return "the SAT decoder checkpoint (model.diffusion_model.* keys)"
    if any(k.startswith(("llm.", "input_resampler.", "output_resampler.")) for k in ks):
        return "the AnimeGamer MLLM agent checkpoint (llm.* keys)"
    if any(k.startswith(("encoder.", "decoder.")) for k in ks):
        return "a 3D VAE checkpoint (encoder.*/decoder.* keys)"
    if any(k.startswith(("transformer_blocks.", "patch_embed.")) for k in ks):
        return "an already converted diffusers transformer"
    return f"an unrecognised state dict (first keys: {ks[:5]})"


def _unwrap(obj: Any, path: str) -> dict[str, Any]:
    for wrapper in ("module", "state_dict", "model"):
        if isinstance(obj, Mapping) and wrapper in obj and isinstance(obj[wrapper], Mapping):
            obj = obj[wrapper]
    if not isinstance(obj, Mapping) or not obj:
        raise CheckpointKindError(f"{path}: not a checkpoint state dict (got {type(obj).__name__})")
    if not any(isinstance(v, torch.Tensor) for v in obj.values()):
        raise CheckpointKindError(f"{path}: holds no tensors")
    # Non-tensor entries stay: the converters account for (or reject) every key.
    return {str(k): v for k, v in obj.items()}


def _require_tensors(sd: Mapping[str, Any], what: str) -> None:
    odd = sorted(k for k, v in sd.items() if not isinstance(v, torch.Tensor))
    if odd:
        raise ConversionError(f"{what} entries that are not tensors (no conversion rule): {odd[:10]}")


def load_state_dict(path: str, trust_pickle: bool = False) -> dict[str, Any]:
    """torch.load with mmap (tensors are read lazily), weights only unless `trust_pickle`."""
    if not os.path.isfile(path):
        raise ConversionError(f"{path}: no such file")
    if path.endswith(".safetensors"):
        raise CheckpointKindError(
            f"{path}: a safetensors file; expected the released torch checkpoint (.pt)"
        )
    with open(path, "rb") as f:
        magic = f.read(4)
    # torch.save writes a zip archive (or, before torch 1.6, a pickle starting with its protocol byte).
    if magic != b"PK\x03\x04" and magic[:1] != b"\x80":
        raise CheckpointKindError(f"{path}: not a torch checkpoint (starts with {magic!r})")
    kwargs = {"map_location": "cpu", "weights_only": not trust_pickle}
    try:
        try:
            obj = torch.load(path, mmap=True, **kwargs)
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise
            # Legacy (non-zip) serialization cannot be memory-mapped: read it whole.
            print(f"warning: {path} cannot be memory-mapped ({e}); loading it into memory", file=sys.stderr)
            obj = torch.load(path, **kwargs)
    except pickle.UnpicklingError as e:
        if trust_pickle:
            raise CheckpointKindError(f"{path}: not a torch checkpoint ({e})") from e
        raise ConversionError(
            f"{path}: the file needs full unpickling (it stores objects besides tensors). If you trust "
            f"its source, rerun with --trust-pickle. ({str(e).splitlines()[0]})"
        ) from e
    except Exception as e:  # torch.load has no single error type for a foreign file
        raise CheckpointKindError(f"{path}: not a readable torch checkpoint ({type(e).__name__}: {e})") from e
    return _unwrap(obj, path)


def resolve_sat_checkpoint(src: str) -> str:
    """SAT directory (with `latest`) or the model-states file itself -> the file."""
    if os.path.isfile(src):
        return src
    if not os.path.isdir(src):
        raise ConversionError(f"{src}: no such file or directory")
    latest = os.path.join(src, "latest")
    if os.path.isfile(latest):
        with open(latest) as f:
            iteration = f.read().strip()
        path = os.path.join(src, iteration, SAT_WEIGHTS_NAME)
        if not os.path.isfile(path):
            raise ConversionError(f"{src}: `latest` says iteration {iteration!r} but {path} is missing")
        return path
    direct = os.path.join(src, SAT_WEIGHTS_NAME)
    if os.path.isfile(direct):
        return direct
    if os.path.isfile(os.path.join(src, "config.json")):
        raise CheckpointKindError(f"{src}: looks like a diffusers/transformers directory, not a SAT checkpoint")
    raise ConversionError(f"{src}: no `latest` file and no {SAT_WEIGHTS_NAME}: not a SAT checkpoint directory")


# ---------------------------------------------------------------------------------------------
# The DiT


def _meta_model_shapes(model_cls, config: Mapping[str, Any]) -> tuple[Any, dict[str, tuple[int, ...]]]:
    with torch.device("meta"):
        model = model_cls(**config)
    return model, {k: tuple(v.shape) for k, v in model.state_dict().items()}


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
    delta = torch.cat([sd[b].float() @ sd[a].float() for a, b in zip(a_keys, b_keys)], dim=0)
    if delta.shape != weight.shape:
        raise ConversionError(f"LoRA of {base} has shape {tuple(delta.shape)}, weight {tuple(weight.shape)}")
    merged = weight + (lora_alpha / r) * delta
    return merged, sd[b_key].float(), [w_key, b_key, *a_keys, *b_keys]


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
        raise CheckpointKindError(f"expected the SAT decoder checkpoint, got {_describe(list(sat))}")
    for k in sat:
        if not k.startswith(prefix):
            account.add(k, "skipped", note="not a DiT key (other sub-model of the SAT file)")
    sd = {k[len(prefix) :]: sat[k] for k in dit_keys}
    _require_tensors(sd, "DiT")
    out: dict[str, torch.Tensor] = {}
    used: dict[str, tuple[str, list[str], str]] = {}

    def take(src_keys: list[str], action: str, targets: list[str], note: str = "") -> None:
        for s in src_keys:
            used[s] = (action, targets, note)

    def rename(src: str, dst: str) -> None:
        if src not in sd:
            raise ConversionError(f"checkpoint lacks {prefix}{src}")
        out[dst] = sd[src]  # still memory-mapped; cast when written
        take([src], "renamed", [dst])

    rename_map = {
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
    for src, dst in rename_map.items():
        for p in ("weight", "bias"):
            rename(f"{src}.{p}", f"{dst}.{p}")

    for i in range(config["num_layers"]):
        sat_l, dif_l = f"transformer.layers.{i}", f"transformer_blocks.{i}"
        for src, dst in (
            ("input_layernorm", "norm1.norm"),
            ("post_attention_layernorm", "norm2.norm"),
            ("mlp.dense_h_to_4h", "ff.net.0.proj"),
            ("mlp.dense_4h_to_h", "ff.net.2"),
        ):
            for p in ("weight", "bias"):
                rename(f"{sat_l}.{src}.{p}", f"{dif_l}.{dst}.{p}")
        for src, dst in (("query_layernorm_list", "norm_q"), ("key_layernorm_list", "norm_k")):
            for p in ("weight", "bias"):
                rename(f"mixins.adaln_layer.{src}.{i}.{p}", f"{dif_l}.attn1.{dst}.{p}")

        # Fused q/k/v (LoRA in three partitions) -> to_q, to_k, to_v.
        w, b, srcs = _merged_linear(sd, f"{sat_l}.attention.query_key_value", 3, lora_alpha)
        targets = []
        for name, wi, bi in zip(("to_q", "to_k", "to_v"), w.chunk(3, 0), b.chunk(3, 0)):
            out[f"{dif_l}.attn1.{name}.weight"], out[f"{dif_l}.attn1.{name}.bias"] = wi, bi
            targets += [f"{dif_l}.attn1.{name}.weight", f"{dif_l}.attn1.{name}.bias"]
        lora = len(srcs) > 2
        take(srcs, "lora-merged+split" if lora else "split", targets)
        w, b, srcs = _merged_linear(sd, f"{sat_l}.attention.dense", 1, lora_alpha)
        out[f"{dif_l}.attn1.to_out.0.weight"], out[f"{dif_l}.attn1.to_out.0.bias"] = w, b
        take(srcs, "lora-merged" if len(srcs) > 2 else "renamed", [f"{dif_l}.attn1.to_out.0.weight", f"{dif_l}.attn1.to_out.0.bias"])

        # adaLN: 12 chunks (video msa shift/scale/gate, video mlp x3, text msa x3, text mlp x3);
        # diffusers' norm1 takes the msa six (video then text), norm2 the mlp six.
        for p in ("weight", "bias"):
            src = f"mixins.adaln_layer.adaLN_modulations.{i}.1.{p}"
            if src not in sd:
                raise ConversionError(f"checkpoint lacks {prefix}{src}")
            c = sd[src].float().chunk(12, dim=0)
            out[f"{dif_l}.norm1.linear.{p}"] = torch.cat(c[0:3] + c[6:9])
            out[f"{dif_l}.norm2.linear.{p}"] = torch.cat(c[3:6] + c[9:12])
            take([src], "split", [f"{dif_l}.norm1.linear.{p}", f"{dif_l}.norm2.linear.{p}"])

    # The unconditional branch, folded into one constant.
    pe = "mixins.patch_embed."
    uncond_params = {k: sd[pe + k] for k in UNCOND_SOURCE_KEYS if pe + k in sd}
    out["uncond_embedding"] = build_uncond_embedding(uncond_params)
    take([pe + k for k in UNCOND_SOURCE_KEYS], "folded", ["uncond_embedding"],
         "LN(text_proj(0)) ++ LN(ip_proj(0)): the constant unconditional tokens")
    for p in ("weight", "bias"):
        k = f"{pe}output_mix_layer_norm.{p}"
        if k in sd:
            take([k], "skipped", [], "unused by the released model (ip width 768: plain concatenation)")
    if any(k.startswith(pe + "mix_proj.") for k in sd):
        raise ConversionError("checkpoint has mix_proj (a variant with a non-768 image branch): not supported")

    # Position table: must be diffusers' sincos table (text rows zero); diffusers recomputes it.
    pos_key = "mixins.pos_embed.pos_embedding"
    if pos_key in sd:
        take([pos_key], "checked", [], _check_pos_embedding(sd[pos_key], config))

    unaccounted = sorted(k for k in sd if k not in used)
    if unaccounted:
        raise ConversionError(
            f"{len(unaccounted)} DiT keys have no conversion rule (nothing is dropped silently): "
            f"{unaccounted[:20]}{' ...' if len(unaccounted) > 20 else ''}"
        )
    for k in dit_keys:
        action, targets, note = used[k[len(prefix) :]]
        account.add(k, action, targets, note)
    return out, account


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


# ---------------------------------------------------------------------------------------------
# The VAE (key map of diffusers' scripts/convert_cogvideox_to_diffusers.py)

_VAE_RENAMES = (
    (re.compile(r"^(encoder|decoder)\.mid\.block_(\d)\."), lambda m: f"{m[1]}.mid_block.resnets.{int(m[2]) - 1}."),
    (re.compile(r"\.block\."), lambda m: ".resnets."),
    (re.compile(r"^encoder\.down\."), lambda m: "encoder.down_blocks."),
    (re.compile(r"\.downsample\."), lambda m: ".downsamplers.0."),
    (re.compile(r"\.upsample\."), lambda m: ".upsamplers.0."),
    (re.compile(r"\.nin_shortcut\."), lambda m: ".conv_shortcut."),
)


def sat_vae_key_to_diffusers(key: str, num_up_blocks: int = 4) -> str:
    new = key
    for pattern, repl in _VAE_RENAMES:
        new = pattern.sub(repl, new)
    # SAT numbers the decoder's up levels from the lowest resolution; diffusers from the highest.
    m = re.match(r"^decoder\.up\.(\d+)\.", new)
    if m:
        new = f"decoder.up_blocks.{num_up_blocks - 1 - int(m[1])}." + new[m.end() :]
    return new


def convert_vae_state_dict(
    sat: Mapping[str, torch.Tensor], config: Mapping[str, Any] = COGVIDEOX_VAE_CONFIG
) -> tuple[dict[str, torch.Tensor], KeyAccount]:
    account = KeyAccount()
    if not any(k.startswith(("encoder.", "decoder.")) for k in sat):
        raise CheckpointKindError(f"expected the CogVideoX 3D VAE (3d-vae.pt), got {_describe(list(sat))}")
    n_up = len(config["up_block_types"])
    _require_tensors({k: v for k, v in sat.items() if not k.startswith("loss.")}, "VAE")
    out = {}
    for k, v in sat.items():
        if k.startswith("loss."):
            account.add(k, "skipped", note="training loss (discriminator/LPIPS) weights")
            continue
        new = sat_vae_key_to_diffusers(k, n_up)
        out[new] = v
        account.add(k, "renamed" if new != k else "kept", [new])
    return out, account


def load_diffusers_vae_dir(path: str) -> tuple[dict[str, torch.Tensor], KeyAccount]:
    """A VAE already in diffusers layout (the `vae/` folder of THUDM/CogVideoX-2b): its keys are
    kept as they are; the shape check against the model still runs."""
    from safetensors.torch import load_file

    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not files or not os.path.isfile(os.path.join(path, "config.json")):
        raise CheckpointKindError(f"{path}: not a diffusers VAE folder (config.json and *.safetensors expected)")
    sd: dict[str, torch.Tensor] = {}
    for f in files:
        sd.update(load_file(os.path.join(path, f)))
    if not any(k.startswith(("encoder.", "decoder.")) for k in sd):
        raise CheckpointKindError(f"{path}: expected the CogVideoX 3D VAE, got {_describe(list(sd))}")
    account = KeyAccount()
    for k in sd:
        account.add(k, "kept", [k])
    return sd, account


def load_vae(path: str, config: Mapping[str, Any], trust_pickle: bool = False) -> tuple[dict[str, torch.Tensor], KeyAccount]:
    """The SAT `3d-vae.pt` (converted) or a diffusers VAE folder (kept)."""
    if os.path.isdir(path):
        return load_diffusers_vae_dir(path)
    sat = load_state_dict(path, trust_pickle)
    return convert_vae_state_dict(sat, config)


# ---------------------------------------------------------------------------------------------
# Checking against the diffusers models and writing


def _check_against_model(
    converted: Mapping[str, torch.Tensor], expected: Mapping[str, tuple[int, ...]], what: str
) -> None:
    missing = sorted(set(expected) - set(converted))
    unexpected = sorted(set(converted) - set(expected))
    wrong = sorted(k for k in set(expected) & set(converted) if tuple(converted[k].shape) != expected[k])
    if missing or unexpected or wrong:
        lines = [f"{what}: converted weights do not fit the diffusers model:"]
        if missing:
            lines.append(f"  missing ({len(missing)}): {missing[:10]}")
        if unexpected:
            lines.append(f"  no place in the model ({len(unexpected)}): {unexpected[:10]}")
        if wrong:
            lines.append(
                "  wrong shape: "
                + ", ".join(f"{k} {tuple(converted[k].shape)} != {expected[k]}" for k in wrong[:10])
            )
        raise ConversionError("\n".join(lines))


def _write_model_dir(model, tensors: Mapping[str, torch.Tensor], out_dir: str, dtype: torch.dtype) -> None:
    os.makedirs(out_dir, exist_ok=True)
    model.save_config(out_dir)
    # Own storage per tensor (q/k/v are views of one merged matrix); contiguous for safetensors.
    data = {k: v.detach().to(dtype).contiguous().clone() for k, v in tensors.items()}
    save_file(data, os.path.join(out_dir, WEIGHTS_NAME), metadata={"format": "pt"})


def convert_decoder(
    src: str,
    vae_file: str,
    out_dir: str,
    dtype: str = "fp16",
    transformer_config: Mapping[str, Any] = ANIMEGAMER_2B_CONFIG,
    vae_config: Mapping[str, Any] = COGVIDEOX_VAE_CONFIG,
    settings: Mapping[str, Any] = DECODER_SETTINGS,
    trust_pickle: bool = False,
    lora_alpha: float = LORA_ALPHA,
) -> dict[str, Any]:
    """Convert and write everything; returns the key account (also written to OUT_DIR)."""
    from .diffusers_api import AutoencoderKLCogVideoX

    if dtype not in DTYPES:
        raise ConversionError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    torch_dtype = DTYPES[dtype]

    # Read and check both inputs before writing anything.
    sat_path = resolve_sat_checkpoint(src)
    sat = load_state_dict(sat_path, trust_pickle)
    dit, dit_account = convert_transformer_state_dict(sat, transformer_config, lora_alpha)
    del sat
    dit_model, dit_shapes = _meta_model_shapes(AnimeGamerTransformer3DModel, transformer_config)
    _check_against_model(dit, dit_shapes, "transformer")

    vae, vae_account = load_vae(vae_file, vae_config, trust_pickle)
    vae_model, vae_shapes = _meta_model_shapes(AutoencoderKLCogVideoX, vae_config)
    _check_against_model(vae, vae_shapes, "vae")

    _write_model_dir(dit_model, dit, os.path.join(out_dir, "transformer"), torch_dtype)
    _write_model_dir(vae_model, vae, os.path.join(out_dir, "vae"), torch_dtype)
    report = {
        "source": {"decoder": os.path.abspath(sat_path), "vae": os.path.abspath(vae_file)},
        "dtype": dtype,
        "lora_scale": f"{lora_alpha:g}/r",
        "transformer": dit_account.to_json(),
        "vae": vae_account.to_json(),
    }
    with open(os.path.join(out_dir, "decoder.json"), "w") as f:
        json.dump({"format": "animegamer-decoder", "version": 1, "dtype": dtype, **settings}, f, indent=2)
    with open(os.path.join(out_dir, "conversion_account.json"), "w") as f:
        json.dump(report, f, indent=1)
    return report


def _skipped_overview(account: Mapping[str, Any]) -> list[str]:
    groups: dict[str, int] = defaultdict(int)
    for k, e in account["keys"].items():
        if e["action"] == "skipped":
            groups[".".join(k.split(".")[:2])] += 1
    return [f"    {n:6d}  {g}.*" for g, n in sorted(groups.items())]


def convert_decoder_main(
    argv: Sequence[str] | None = None,
    transformer_config: Mapping[str, Any] = ANIMEGAMER_2B_CONFIG,
    vae_config: Mapping[str, Any] = COGVIDEOX_VAE_CONFIG,
) -> int:
    """Entry point of `animegamer convert-decoder SRC_DIR VAE_FILE OUT_DIR`; returns an exit code.

    The configs are the released model's; other values are for tests.
    """
    parser = argparse.ArgumentParser(
        prog="animegamer convert-decoder",
        description="Convert the released SAT decoder (LoRA merged) and the 3D VAE to diffusers/safetensors.",
    )
    parser.add_argument("src_dir", help="SAT checkpoint directory (with `latest`) or its mp_rank_00_model_states.pt")
    parser.add_argument("vae_file", help="the CogVideoX 3D VAE: the SAT 3d-vae.pt, or a diffusers vae/ folder")
    parser.add_argument("out_dir", help="output directory (transformer/, vae/, decoder.json)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp16", help="stored weight dtype (default fp16, as released)")
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="allow full unpickling when a file stores objects besides tensors (only for files you trust)",
    )
    args = parser.parse_args(argv)
    try:
        report = convert_decoder(
            args.src_dir,
            args.vae_file,
            args.out_dir,
            args.dtype,
            transformer_config=transformer_config,
            vae_config=vae_config,
            trust_pickle=args.trust_pickle,
        )
    except ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for part in ("transformer", "vae"):
        print(f"{part}: " + ", ".join(f"{n} {a}" for a, n in sorted(report[part]["summary"].items())))
        skipped = _skipped_overview(report[part])
        if skipped:
            print("  skipped:")
            print("\n".join(skipped))
    print(f"wrote {args.out_dir} (every key: {os.path.join(args.out_dir, 'conversion_account.json')})")
    return 0
