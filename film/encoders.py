"""The three frozen encoders whose outputs training reads instead of running them (film.features).

- The CogVideoX 3D VAE (diffusers' AutoencoderKLCogVideoX): a 17-frame 480x720 clip -> 5 latent
  frames of 16 x 60 x 90, the posterior mean times the scaling factor, in the sampler's layout
  (T, C, h, w). Tiled (and sliced: clips go through it one by one), as the decoder's low_vram mode.
  Loaded from a converted decoder folder (`<decoder>/vae`, what the worker loads) or a diffusers
  VAE folder; a SAT `3d-vae.pt` becomes one through `animegamer convert-decoder`.
- CLIP's image tower (transformers' CLIPVisionModel): the clip's first frame -> 196 x 768 patch
  tokens at ViT-B/16. The released decoder's encoder is open_clip ViT-B-16 (laion2b_s34b_b88k): the
  frame, in [-1, 1], resized to 224 x 224 (bicubic, antialiased; no crop: the 3:2 frame is
  squeezed), mapped to [0, 1] and normalised with OpenAI CLIP's mean and std, then all transformer
  blocks but the last, class token dropped, no final LayerNorm. In transformers that is
  `hidden_states[-2][:, 1:]`, and the same weights exist in transformers' format
  (laion/CLIP-ViT-B-16-laion2B-s34B-b88K ships a config.json and weights CLIPVisionModel loads).
  The release resizes with kornia (a Gaussian blur, then bicubic); torch's antialiased bicubic
  here is PIL's filter, so the features differ from the release's in the resize only.
- T5 (transformers' T5EncoderModel, t5-v1_1-xxl for CogVideoX): a text -> 30 x 4096, tokens padded
  or truncated to 30 and encoded without an attention mask, as the released decoder's T5 embedder
  runs (its 30 text tokens and CLIP's 196 image tokens are the representation's 226).
  Loaded from a T5 folder (model and tokenizer) or a CogVideoX folder (`text_encoder/`, `tokenizer/`).

Each loader returns the model in eval mode; the caller frees it before loading the next.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.nn.functional as F

from inference.decoder.diffusers_api import AutoencoderKLCogVideoX, vae_config
from inference.decoder.uncond import UNCOND_TEXT_TOKENS

if TYPE_CHECKING:
    from diffusers.models.modeling_outputs import AutoencoderKLOutput

T5_TOKENS = UNCOND_TEXT_TOKENS  # the released encoder's text length: 30 text + 196 image = 226 tokens
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)  # the release's normalisation (OpenAI CLIP's)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ModelFolderError(ValueError):
    """A model folder that cannot be used; the message names the folder and what is expected."""


def _pretrained(cls: Any, folder: Path, option: str, dtype: torch.dtype, ignored: tuple[str, ...] = ()) -> Any:
    """`cls.from_pretrained` with its key report checked here: a weight the model lacks in the
    folder would be left random, so it is an error; keys of other towers (`ignored` prefixes: a
    whole CLIP checkpoint's text tower) are expected, and transformers' report of them is silenced."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = cls.from_pretrained(str(folder), dtype=dtype, output_loading_info=True)
    except (OSError, ValueError, KeyError) as e:
        raise ModelFolderError(f"{option} {folder}: transformers cannot load it as {cls.__name__}: {e}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        raise ModelFolderError(f"{option} {folder}: not a {cls.__name__} checkpoint: {len(missing)} weight(s) missing, "
                               f"e.g. {', '.join(missing[:3])}")
    unexpected = [k for k in info.get("unexpected_keys") or () if not k.startswith(ignored)]
    if unexpected:
        raise ModelFolderError(f"{option} {folder}: weights {cls.__name__} does not have, e.g. "
                               f"{', '.join(sorted(unexpected)[:3])}")
    return model


def _folder(path: Path, option: str, what: str) -> Path:
    if not path.is_dir():
        raise ModelFolderError(f"{option} {path}: no such folder (expected {what})")
    return path


def _config(folder: Path, option: str) -> dict[str, Any]:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFolderError(f"{option} {folder}: config.json cannot be read: {e}") from None


def check_folders(vae: Path, t5: Path, clip: Path) -> None:
    """Each folder holds the model its option names (read from its config, before any work)."""
    kind = _config(vae_folder(vae), "--vae").get("_class_name")
    if kind != "AutoencoderKLCogVideoX":
        raise ModelFolderError(f"--vae {vae}: a {kind or 'model'} folder, not the CogVideoX VAE (AutoencoderKLCogVideoX)")
    kind = _config(t5_folders(t5)[0], "--t5").get("model_type")
    if kind not in ("t5", "umt5"):
        raise ModelFolderError(f"--t5 {t5}: a {kind or 'model'} folder, not a T5 encoder")
    _folder(clip, "--clip", "a CLIP model folder in transformers' format (e.g. a ViT-B/16)")
    kind = _config(clip, "--clip").get("model_type")
    if kind not in ("clip", "clip_vision_model"):
        raise ModelFolderError(f"--clip {clip}: a {kind or 'model'} folder, not a CLIP model")


# --- the VAE


def vae_folder(path: Path) -> Path:
    """A converted decoder folder's `vae/`, or a diffusers VAE folder itself."""
    _folder(path, "--vae", "a converted decoder folder or a diffusers CogVideoX VAE folder")
    for candidate in (path / "vae", path):
        if (candidate / "config.json").is_file():
            return candidate
    hint = " (convert it first: animegamer convert-decoder)" if any(path.glob("*.pt")) else ""
    raise ModelFolderError(f"--vae {path}: no config.json here or in vae/: not a diffusers CogVideoX VAE{hint}")


def load_vae(path: Path, device: torch.device, dtype: torch.dtype) -> AutoencoderKLCogVideoX:
    folder = vae_folder(path)
    try:
        vae = AutoencoderKLCogVideoX.from_pretrained(str(folder), torch_dtype=dtype)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise ModelFolderError(f"--vae {folder}: diffusers cannot load it as AutoencoderKLCogVideoX: {e}") from None
    vae.enable_tiling()
    vae.enable_slicing()
    torch.nn.Module.to(vae, device)  # the typed call (diffusers wraps .to)
    return vae.eval()


def video_tensor(frames: np.ndarray, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """uint8 (B, F, H, W, 3) -> (B, 3, F, H, W) in [-1, 1]."""
    x = torch.from_numpy(frames).to(device).permute(0, 4, 1, 2, 3)
    return (x.to(dtype) / 127.5 - 1.0).contiguous()


@torch.inference_mode()
def encode_latents(vae: AutoencoderKLCogVideoX, frames: np.ndarray) -> torch.Tensor:
    """uint8 clips (B, 17, H, W, 3) -> latents (B, 5, C, H/8, W/8): the posterior mean (no sample:
    the same clip gives the same latents) times the scaling factor, as the sampler holds them."""
    x = video_tensor(frames, vae.device, vae.dtype)
    posterior = cast("AutoencoderKLOutput", vae.encode(x)).latent_dist
    z = posterior.mode() * vae_config(vae).scaling_factor  # (B, C, T, h, w)
    return z.permute(0, 2, 1, 3, 4).float().cpu()


# --- CLIP's image tower


def load_clip(path: Path, device: torch.device, dtype: torch.dtype) -> Any:
    from transformers import CLIPVisionModel

    _folder(path, "--clip", "a CLIP model folder in transformers' format (e.g. a ViT-B/16)")
    model = _pretrained(CLIPVisionModel, path, "--clip", dtype,
                        ignored=("text_model.", "text_projection.", "visual_projection.", "logit_scale"))
    torch.nn.Module.to(model, device)
    return model.eval()


@torch.inference_mode()
def image_features(model: Any, images: np.ndarray) -> torch.Tensor:
    """uint8 frames (B, H, W, 3) -> patch tokens (B, (S/P)^2, D): the penultimate block's output
    without the class token (196 x 768 at ViT-B/16, 224 px)."""
    size = int(model.config.image_size)
    x = torch.from_numpy(images).to(model.device).permute(0, 3, 1, 2).float() / 255.0
    x = F.interpolate(x, size=(size, size), mode="bicubic", antialias=True, align_corners=False)
    mean = torch.tensor(CLIP_MEAN, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(CLIP_STD, device=x.device).view(1, 3, 1, 1)
    x = ((x - mean) / std).to(model.dtype)
    out = model(pixel_values=x, output_hidden_states=True)
    return out.hidden_states[-2][:, 1:].float().cpu()


# --- T5


def t5_folders(path: Path) -> tuple[Path, Path]:
    """(model folder, tokenizer folder): a CogVideoX folder's text_encoder/ and tokenizer/, or one T5 folder."""
    _folder(path, "--t5", "a T5 encoder folder (t5-v1_1-xxl) or a CogVideoX folder with text_encoder/ and tokenizer/")
    if (path / "text_encoder" / "config.json").is_file():
        return path / "text_encoder", path / "tokenizer"
    if (path / "config.json").is_file():
        return path, path
    raise ModelFolderError(f"--t5 {path}: no config.json here or in text_encoder/")


def load_t5(path: Path, device: torch.device, dtype: torch.dtype) -> tuple[Any, Any]:
    from transformers import AutoTokenizer, T5EncoderModel

    model_dir, tokenizer_dir = t5_folders(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    except (OSError, ValueError, KeyError) as e:
        raise ModelFolderError(f"--t5 {tokenizer_dir}: transformers cannot load its tokenizer: {e}") from None
    # a whole T5 checkpoint (encoder and decoder) is fine: the decoder's weights are not read
    model = _pretrained(T5EncoderModel, model_dir, "--t5", dtype, ignored=("decoder.", "lm_head."))
    torch.nn.Module.to(model, device)
    return tokenizer, model.eval()


@torch.inference_mode()
def text_features(tokenizer: Any, model: Any, texts: list[str]) -> torch.Tensor:
    """Texts -> (B, 30, D): the last hidden state over 30 tokens (padded, or truncated), no mask."""
    ids = tokenizer(texts, padding="max_length", max_length=T5_TOKENS, truncation=True, add_special_tokens=True,
                    return_tensors="pt").input_ids
    return model(input_ids=ids.to(model.device)).last_hidden_state.float().cpu()
