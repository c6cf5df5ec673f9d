"""The CogVideoX 3D VAE for the decoder converter (inference.decoder.convert): the SAT `3d-vae.pt`
renamed to diffusers' layout (the key map of diffusers' scripts/convert_cogvideox_to_diffusers.py),
or a diffusers `vae/` folder kept as it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import torch

from .convert_checkpoints import CheckpointKindError, KeyAccount, describe_state_dict, load_state_dict, require_tensors
from .vae import COGVIDEOX_VAE_CONFIG

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
        raise CheckpointKindError(f"expected the CogVideoX 3D VAE (3d-vae.pt), got {describe_state_dict(list(sat))}")
    n_up = len(config["up_block_types"])
    require_tensors({k: v for k, v in sat.items() if not k.startswith("loss.")}, "VAE")
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
        raise CheckpointKindError(f"{path}: expected the CogVideoX 3D VAE, got {describe_state_dict(list(sd))}")
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

