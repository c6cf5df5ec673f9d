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
    OUT_DIR/preview_rgb.json                                                latents -> preview colours (latent_preview)
    OUT_DIR/conversion_account.json

The reading of the checkpoints (convert_checkpoints), the DiT key map with its LoRA merge
(convert_dit) and the VAE's (convert_vae) are modules of their own; their public names are
importable from here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from safetensors.torch import save_file

from .convert_checkpoints import (
    DIT_PREFIX,
    SAT_WEIGHTS_NAME,
    CheckpointKindError,
    ConversionError,
    KeyAccount,
    load_state_dict,
    resolve_sat_checkpoint,
)
from .convert_dit import LORA_ALPHA, convert_transformer_state_dict
from .convert_vae import convert_vae_state_dict, load_diffusers_vae_dir, load_vae, sat_vae_key_to_diffusers
from .latent_preview import fit_latent_rgb
from .transformer import ANIMEGAMER_2B_CONFIG, AnimeGamerTransformer3DModel
from .vae import COGVIDEOX_VAE_CONFIG

__all__ = [
    "DECODER_SETTINGS",
    "DIT_PREFIX",
    "DTYPES",
    "LORA_ALPHA",
    "SAT_WEIGHTS_NAME",
    "WEIGHTS_NAME",
    "CheckpointKindError",
    "ConversionError",
    "KeyAccount",
    "convert_decoder",
    "convert_decoder_main",
    "convert_transformer_state_dict",
    "convert_vae_state_dict",
    "load_diffusers_vae_dir",
    "load_state_dict",
    "load_vae",
    "resolve_sat_checkpoint",
    "sat_vae_key_to_diffusers",
]

WEIGHTS_NAME = "diffusion_pytorch_model.safetensors"
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}

# Clip settings written next to the weights (the released inference config).
DECODER_SETTINGS = {"num_latent_frames": 5, "height": 480, "width": 720, "fps": 8}


def _meta_model_shapes(model_cls, config: Mapping[str, Any]) -> tuple[Any, dict[str, tuple[int, ...]]]:
    with torch.device("meta"):
        model = model_cls(**config)
    return model, {k: tuple(v.shape) for k, v in model.state_dict().items()}



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
    from .diffusers_api import AutoencoderKLCogVideoX, to_device

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
    del vae
    # The preview map (latent_preview), fitted once from the VAE just written, in float32 (on a GPU
    # if there is one; about 9 minutes on a 2-thread CPU at full size: bench/preview_cost.py).
    fit_vae = AutoencoderKLCogVideoX.from_pretrained(os.path.join(out_dir, "vae"), torch_dtype=torch.float32)
    to_device(fit_vae, "cuda" if torch.cuda.is_available() else "cpu")
    fit_latent_rgb(fit_vae).save(out_dir)
    del fit_vae
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
