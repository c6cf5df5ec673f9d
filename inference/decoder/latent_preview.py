"""Latents -> a rough RGB picture without the VAE: one linear map per latent pixel (16 channels + 1
-> 3 colours), the way ComfyUI previews image models, fitted to this decoder's own VAE.

The map is fitted once, by least squares, when the decoder is converted: the VAE encodes a fixed
set of generated pictures (colour gradients, discs, stripes; no download), and the map is the
one that best turns each latent pixel into the mean colour of the 8x8 pixels the VAE decodes it
to (fit_latent_rgb says which latents and why). It is
stored beside the converted decoder (`preview_rgb.json`); a decoder converted before has its map
fitted at load instead (seconds on a GPU; minutes on a CPU at full size).

Cost (bench/preview_cost.py, docs/performance.md): at 480x720 a latent frame is 60x90 pixels, so
a preview is 5,400 x 16 x 3 multiply-adds plus the bias (0.53 MFLOP), where a VAE decode of one
latent frame even at half size (240x360) is 1.87 TFLOP (66 s on a 2-thread CPU).
"""

from __future__ import annotations

import copy
import json
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import torch

from .diffusers_api import AutoencoderKLCogVideoX, decode_vae, vae_config

if TYPE_CHECKING:
    from diffusers.models.modeling_outputs import AutoencoderKLOutput

log = logging.getLogger(__name__)

FILE_NAME = "preview_rgb.json"
FIT_SIZE = (64, 96)  # pixels of each fitting picture (8 x 12 latent pixels through the 8x VAE)
FIT_PICTURES = 24


@dataclass(frozen=True)
class LatentRGB:
    """RGB in [-1, 1] = latent @ weight + bias, per latent pixel; latents as the sampler has them
    (multiplied by the VAE's scale factor)."""

    weight: np.ndarray  # (C, 3)
    bias: np.ndarray  # (3,)

    @property
    def channels(self) -> int:
        return int(self.weight.shape[0])

    def project(self, frame: torch.Tensor) -> torch.Tensor:
        """One latent frame (C, h, w), on any device -> (3, h, w) float32 in about [-1, 1], on the
        same device (a small kernel: on a GPU it is queued, not waited for)."""
        if frame.shape[0] != self.channels:
            raise ValueError(f"the preview map takes {self.channels} latent channels, got {frame.shape[0]}")
        w = torch.as_tensor(self.weight, dtype=torch.float32, device=frame.device)
        b = torch.as_tensor(self.bias, dtype=torch.float32, device=frame.device)
        return torch.einsum("chw,cd->dhw", frame.float(), w) + b[:, None, None]

    def save(self, model_dir: str) -> str:
        path = os.path.join(model_dir, FILE_NAME)
        with open(path, "w") as f:
            json.dump({"format": "animegamer-latent-rgb", "version": 1,
                       "weight": self.weight.tolist(), "bias": self.bias.tolist()}, f)
        return path

    @classmethod
    def load(cls, model_dir: str) -> LatentRGB | None:
        """The map stored beside a converted decoder, or None if there is none (converted earlier)."""
        path = os.path.join(model_dir, FILE_NAME)
        if not os.path.isfile(path):
            return None
        with open(path) as f:
            data = json.load(f)
        if data.get("format") != "animegamer-latent-rgb":
            raise ValueError(f"{path} is not a latent preview map")
        return cls(np.asarray(data["weight"], np.float32), np.asarray(data["bias"], np.float32))


def fitting_pictures(n: int = FIT_PICTURES, size: tuple[int, int] = FIT_SIZE, seed: int = 0) -> np.ndarray:
    """n fixed pictures (n, 3, H, W) in [-1, 1]: gradients between random colours, with discs and
    stripes of other colours, so that the fit sees saturated and mixed colours, flat areas and edges."""
    rng = np.random.default_rng(seed)
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = np.empty((n, 3, h, w), np.float32)
    for i in range(n):
        a, b = rng.uniform(-1, 1, (2, 3, 1, 1)).astype(np.float32)
        angle = rng.uniform(0, 2 * np.pi)
        ramp = (np.cos(angle) * xx / w + np.sin(angle) * yy / h + 1) / 2
        img = a * (1 - ramp) + b * ramp
        for _ in range(int(rng.integers(1, 4))):
            cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(h / 8, h / 2)
            img = np.where(((yy - cy) ** 2 + (xx - cx) ** 2) < r * r, rng.uniform(-1, 1, (3, 1, 1)).astype(np.float32), img)
        if i % 3 == 0:
            period = rng.uniform(6, 24)
            img = np.where(np.sin(xx / period * 2 * np.pi) > 0.6, rng.uniform(-1, 1, (3, 1, 1)).astype(np.float32), img)
        out[i] = img
    return out


@torch.no_grad()
def fit_latent_rgb(vae: AutoencoderKLCogVideoX, pictures: np.ndarray | None = None, batch: int = 4, seed: int = 0) -> LatentRGB:
    """Least squares from latents to the mean colour the VAE's decoder gives each latent pixel.

    The latents: what the encoder gives for `pictures` (default: the fixed set), and as many fixed
    standard-normal latents (the sampler's scale), so that the map also covers the rough early
    estimates. The targets are the decoder's output rather than the pictures themselves: for a
    trained VAE they are the pictures again, and either way they are what the clip goes through.
    """
    pics = fitting_pictures() if pictures is None else pictures
    cfg = vae_config(vae)
    spatial = 2 ** (len(cfg.block_out_channels) - 1)
    param = next(vae.parameters())
    generator = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    for start in range(0, len(pics), batch):
        x = torch.from_numpy(pics[start : start + batch])[:, :, None].to(param.device, param.dtype)  # (B, 3, 1, H, W)
        z = cast("AutoencoderKLOutput", vae.encode(x)).latent_dist.mode()  # (B, C, 1, h, w), the VAE's scale
        drawn = torch.randn(z.shape, generator=generator) / cfg.scaling_factor
        for lat in (z, drawn.to(z.device, z.dtype)):
            rgb = decode_vae(vae, lat)[:, :, 0].float().cpu()  # (B, 3, H, W)
            target = torch.nn.functional.avg_pool2d(rgb, spatial)  # the colour each latent pixel covers
            lat = lat[:, :, 0].float().cpu() * cfg.scaling_factor  # the sampler's scale
            xs.append(lat.permute(0, 2, 3, 1).reshape(-1, lat.shape[1]))
            ys.append(target.permute(0, 2, 3, 1).reshape(-1, 3))
    a = torch.cat(xs).double()
    a = torch.cat([a, torch.ones(a.shape[0], 1, dtype=a.dtype)], dim=1)
    sol = torch.linalg.lstsq(a, torch.cat(ys).double()).solution  # (C + 1, 3)
    return LatentRGB(sol[:-1].float().numpy(), sol[-1].float().numpy())


def load_or_fit(model_dir: str, vae: AutoencoderKLCogVideoX) -> LatentRGB:
    """The stored map, or one fitted now (a decoder converted before previews existed)."""
    found = LatentRGB.load(model_dir)
    if found is not None:
        return found
    log.warning("no %s beside the decoder in %s: fitting the preview map now (seconds on a GPU, minutes on a CPU; "
                "convert the decoder again to store one)", FILE_NAME, model_dir)
    param = next(vae.parameters())
    if param.device.type == "cpu" and param.dtype != torch.float32:  # a CPU's half-precision convolutions crawl
        return fit_latent_rgb(copy.deepcopy(vae).float())
    return fit_latent_rgb(vae)
