"""What a decoder phase leaves: the trained DiT with its LoRA merged, written as `animegamer
convert-decoder` writes a decoder folder (what the worker's `load_decoder` reads), and a sample clip
decoded by the worker's own sampler at a checkpoint."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import torch
from torch import nn

from inference.decoder.convert import DECODER_SETTINGS
from inference.decoder.latent_preview import FILE_NAME as PREVIEW_FILE
from inference.decoder.transformer import AnimeGamerTransformer3DModel

from .decoder_data import DecoderDataError

DECODER_DIR = "decoder"  # under the export folder: what `load_decoder` reads
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}



def merged_transformer(transformer: AnimeGamerTransformer3DModel) -> AnimeGamerTransformer3DModel:
    """A float32 copy on the CPU with the LoRA merged into the base weights and removed (the plain
    AnimeGamerTransformer3DModel the worker loads)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    plain = copy.deepcopy(transformer)
    nn.Module.to(plain, "cpu", torch.float32)  # ModelMixin.to's stub takes no device
    for name, module in list(plain.named_modules()):
        if isinstance(module, BaseTunerLayer):
            module.merge()
            parent_name, _, child = name.rpartition(".")
            plain.get_submodule(parent_name).register_module(child, module.get_base_layer())
    leftover = [k for k in plain.state_dict() if "lora_" in k or "base_layer" in k]
    if leftover:
        raise RuntimeError(f"LoRA left after the merge: {leftover[:5]}")
    # peft records the adapter on the model; the exported folder holds plain weights.
    for attr in ("_hf_peft_config_loaded", "peft_config"):
        if hasattr(plain, attr):
            delattr(plain, attr)
    return plain


def export_decoder(transformer: AnimeGamerTransformer3DModel, out: Path, *, uncond: torch.Tensor | None,
                   base: str | Path | None, vae: str | Path | None, dtype: str) -> Path:
    """Write `out/decoder/` as `animegamer convert-decoder` does (transformer/, vae/, decoder.json,
    preview_rgb.json when the base has one): `load_decoder` reads it with no other step.
    uncond: the unconditional tokens to store (phase (a): from the trained encoder); None keeps
    the DiT's own."""
    folder = Path(out) / DECODER_DIR
    plain = merged_transformer(transformer)
    if uncond is not None:
        plain.uncond_embedding.copy_(uncond.to(plain.uncond_embedding.dtype))
    base_dir = Path(base) if base else None
    vae_dir = Path(vae) if vae else (base_dir / "vae" if base_dir else None)
    if vae_dir is None or not (vae_dir / "config.json").is_file():
        raise DecoderDataError(f"no VAE folder to export with the decoder ({vae_dir}): set phase.vae to a "
                               "diffusers CogVideoX VAE folder (a converted decoder's vae/)")
    folder.mkdir(parents=True, exist_ok=True)
    nn.Module.to(plain, DTYPES[dtype])
    plain.save_pretrained(str(folder / "transformer"), safe_serialization=True)
    if (folder / "vae").exists():
        shutil.rmtree(folder / "vae")
    shutil.copytree(vae_dir, folder / "vae")
    settings = {"format": "animegamer-decoder", "version": 1, **DECODER_SETTINGS}
    if base_dir and (base_dir / "decoder.json").is_file():
        settings = json.loads((base_dir / "decoder.json").read_text(encoding="utf-8"))
    settings["dtype"] = dtype
    (folder / "decoder.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    if base_dir and (base_dir / PREVIEW_FILE).is_file() and vae_dir == base_dir / "vae":
        shutil.copy2(base_dir / PREVIEW_FILE, folder / PREVIEW_FILE)  # the same VAE: the same map
    return folder


def sample_clip(transformer: AnimeGamerTransformer3DModel, base: str | Path | None, vae: str | Path | None,
                rep: torch.Tensor, flow: float, path: Path, *, seed: int = 0, steps: int = 50,
                autocast: torch.dtype | None = None) -> Path:
    """A clip decoded by the worker's own sampler (AnimeGamerDecoder: guidance, the released
    schedule) from one representation with the DiT as it is being trained (its LoRA unmerged),
    written as MP4 to `path`: a look at the film being learned. The VAE is loaded for it alone and
    freed; the DiT goes back to training mode."""
    from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
    from inference.decoder.pipeline import AnimeGamerDecoder
    from inference.mp4 import encode_mp4

    base_dir = Path(base) if base else None
    vae_dir = Path(vae) if vae else (base_dir / "vae" if base_dir else None)
    if vae_dir is None or not (vae_dir / "config.json").is_file():
        raise DecoderDataError(f"no VAE folder to decode a sample with ({vae_dir}): set phase.vae")
    settings = dict(DECODER_SETTINGS)
    if base_dir and (base_dir / "decoder.json").is_file():
        settings.update(json.loads((base_dir / "decoder.json").read_text(encoding="utf-8")))
    device = rep.device if rep.device.type != "meta" else torch.device("cpu")
    vae_model = AutoencoderKLCogVideoX.from_pretrained(str(vae_dir), torch_dtype=torch.float32)
    nn.Module.to(vae_model, device)
    was_training = transformer.training
    decoder = AnimeGamerDecoder(transformer, vae_model, steps=steps, num_latent_frames=settings["num_latent_frames"],
                                height=settings["height"], width=settings["width"], fps=settings["fps"])
    try:
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            frames = decoder.decode(rep.detach().float().cpu().numpy(), flow, seed)
    finally:
        transformer.train(was_training)
        del decoder, vae_model
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_mp4(frames, fps=int(settings["fps"])))
    return path
