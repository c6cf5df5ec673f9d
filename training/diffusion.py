"""The decoder's training objective: the released noise schedule, v-prediction and its L2 loss,
timestep sampling and the condition dropout that trains the unconditional branch.

Schedule: the 1000-step table the sampler's denoiser reads (inference.decoder.schedule): scaled-
linear betas 0.00085..0.012, SNR shifted by 3.0, sqrt(alpha_bar) rescaled to zero terminal SNR
(sqrt(alpha_bar[999]) == 0). Defined once there; training indexes the same table.

With a = sqrt(alpha_bar_t) and s = sqrt(1 - alpha_bar_t):
    x_t = a x_0 + s eps,    v = a eps - s x_0,    x_0 = a x_t - s v   (what the sampler uses)
The released loss (SAT's VideoDiffusionLoss, v-prediction weighting 1 / s^2 on the x_0 error)
equals the L2 error of v: a x_t - s v_pred - x_0 = -s (v_pred - v). It is computed on v
directly, which stays finite at t = 0 (s = 0). Timesteps are drawn uniformly from 0..999, as
SAT's DiscreteSampling does.

Condition dropout (classifier-free guidance): each sample's text and image features are zeroed
with 5 % probability each, independently, as the released conditioner's `ucg_rate` does; zeros
through the projections are exactly how the decoder's unconditional branch is built. When the
condition is already a representation (phase (c): the MLLM's prediction), a dropped part is
replaced by that part of the unconditional tokens instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference.decoder.schedule import SCHEDULE, table_sqrt_alphas_cumprod
from inference.decoder.uncond import UNCOND_TEXT_TOKENS

NUM_TIMESTEPS = SCHEDULE["num_train_timesteps"]
TEXT_DROP = 0.05
IMAGE_DROP = 0.05


@dataclass(frozen=True)
class NoiseSchedule:
    sqrt_alpha_bar: torch.Tensor  # (1000,) float32, indexed by the DDPM timestep

    @classmethod
    def released(cls) -> NoiseSchedule:
        return cls(table_sqrt_alphas_cumprod())

    @property
    def alpha_bar(self) -> torch.Tensor:
        return self.sqrt_alpha_bar.square()

    def _coefficients(self, t: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.sqrt_alpha_bar.to(like.device)[t].float()
        s = (1 - a.square()).clamp_min(0).sqrt()
        shape = (-1,) + (1,) * (like.dim() - 1)
        return a.view(shape), s.view(shape)

    def add_noise(self, x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        a, s = self._coefficients(t, x0)
        return a * x0.float() + s * noise.float()

    def v_target(self, x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        a, s = self._coefficients(t, x0)
        return a * noise.float() - s * x0.float()

    def x0_from_v(self, x_t: torch.Tensor, v: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        a, s = self._coefficients(t, x_t)
        return a * x_t.float() - s * v.float()


def sample_timesteps(batch: int, device: torch.device | str, generator: torch.Generator | None = None) -> torch.Tensor:
    """Uniform DDPM indices 0..999, one per sample."""
    return torch.randint(0, NUM_TIMESTEPS, (batch,), device=device, generator=generator)


def v_loss(v_pred: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The L2 loss of the v-prediction, in float32, averaged over every element."""
    return torch.nn.functional.mse_loss(v_pred.float(), v.float())


def drop_masks(
    batch: int, device: torch.device | str, text_p: float = TEXT_DROP, image_p: float = IMAGE_DROP,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample booleans: True where the text (resp. image) condition is dropped."""
    u = torch.rand((2, batch), device=device, generator=generator)
    return u[0] < text_p, u[1] < image_p


def drop_features(
    text: torch.Tensor, image: torch.Tensor, drop_text: torch.Tensor, drop_image: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero the dropped samples' T5 and CLIP features (before the encoder's projections)."""
    keep_t = (~drop_text).to(text.dtype).view(-1, 1, 1)
    keep_i = (~drop_image).to(image.dtype).view(-1, 1, 1)
    return text * keep_t, image * keep_i


def drop_representation(
    rep: torch.Tensor, uncond: torch.Tensor, drop_text: torch.Tensor, drop_image: torch.Tensor,
    text_tokens: int = UNCOND_TEXT_TOKENS,
) -> torch.Tensor:
    """A representation (B, 226, D) whose dropped parts (the first `text_tokens` rows for text, the
    rest for the image) are the unconditional tokens (226, D)."""
    rows = torch.arange(rep.shape[1], device=rep.device)
    is_text = (rows < text_tokens).view(1, -1, 1)
    drop = torch.where(is_text, drop_text.view(-1, 1, 1), drop_image.view(-1, 1, 1))
    return torch.where(drop, uncond.to(rep.device, rep.dtype).unsqueeze(0), rep)
