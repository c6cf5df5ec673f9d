"""Noise schedule and guidance of the released decoder (configs/cogvideox_2b.yaml).

Schedule: scaled-linear betas 0.00085..0.012 over 1000 steps, SNR shifted by 3.0
(alpha_bar / (3 - 2 alpha_bar)), zero terminal SNR by rescaling sqrt(alpha_bar), v-prediction,
trailing spacing (999, 979, ..., 19 for 50 steps).

Two details of the release that diffusers' CogVideoXDPMScheduler does not share:
- The zero-SNR rescale is applied to the 50 chosen steps, not to the 1000-step table, so the
  sampler's sqrt(alpha_bar) differs from the 1000-step table by up to ~1e-3.
- The denoiser snaps each step's sqrt(alpha_bar) to the nearest entry of the 1000-step table
  before x0 = a x - sqrt(1 - a^2) v (for small t that is the entry of t - 1).
The release builds the tables in float64, then does all the rest in float32: so do we.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from .diffusers_api import CogVideoXDPMScheduler

# Data, as in the released config.
SCHEDULE = {
    "num_train_timesteps": 1000,
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "snr_shift_scale": 3.0,
}
GUIDANCE = {"scale": 6.0, "exp": 5, "num_steps": 50}  # DynamicCFG(scale=6, exp=5, num_steps=50)
DEFAULT_STEPS = 50

STOCK_SCHEDULER_CONFIG = {
    "num_train_timesteps": SCHEDULE["num_train_timesteps"],
    "beta_start": SCHEDULE["beta_start"],
    "beta_end": SCHEDULE["beta_end"],
    "beta_schedule": "scaled_linear",
    "prediction_type": "v_prediction",
    "rescale_betas_zero_snr": True,
    "snr_shift_scale": SCHEDULE["snr_shift_scale"],
    "timestep_spacing": "trailing",
    "set_alpha_to_one": True,
    "clip_sample": False,
    "steps_offset": 0,
}


def shifted_alphas_cumprod(
    num_train_timesteps: int = SCHEDULE["num_train_timesteps"],
    beta_start: float = SCHEDULE["beta_start"],
    beta_end: float = SCHEDULE["beta_end"],
    snr_shift_scale: float = SCHEDULE["snr_shift_scale"],
) -> np.ndarray:
    """alpha_bar(t) for t = 0..999 after the SNR shift, float64 (before any zero-SNR rescale)."""
    betas = np.linspace(beta_start**0.5, beta_end**0.5, num_train_timesteps, dtype=np.float64) ** 2
    ac = np.cumprod(1.0 - betas)
    return ac / (snr_shift_scale + (1.0 - snr_shift_scale) * ac)


def released_timesteps(num_steps: int, num_train_timesteps: int = SCHEDULE["num_train_timesteps"]) -> np.ndarray:
    """DDPM indices visited, noisiest first: 999, 979, ..., 19 for 50 steps."""
    if not 1 <= num_steps < num_train_timesteps:
        raise ValueError(f"num_steps must be in 1..{num_train_timesteps - 1}, got {num_steps}")
    ascending = np.linspace(num_train_timesteps - 1, 0, num_steps, endpoint=False).astype(int)[::-1]
    return ascending[::-1].copy()


def _zero_snr_sqrt(alphas_cumprod: np.ndarray) -> torch.Tensor:
    """sqrt(alpha_bar) rescaled so that its noisiest entry is 0 and its cleanest is unchanged.

    Input ordered clean -> noisy (ascending t). float32, like the release.
    """
    s = torch.tensor(alphas_cumprod, dtype=torch.float32).sqrt()
    s0, sT = s[0].clone(), s[-1].clone()
    s -= sT
    s *= s0 / (s0 - sT)
    return s


def table_sqrt_alphas_cumprod(**schedule) -> torch.Tensor:
    """The denoiser's 1000-entry table, indexed by t (float32)."""
    return _zero_snr_sqrt(shifted_alphas_cumprod(**schedule))


@dataclass(frozen=True)
class ReleasedSchedule:
    timesteps: np.ndarray  # (n,) int, noisiest first
    sqrt_alphas: torch.Tensor  # (n + 1,) float32: the sampler's sqrt(alpha_bar) per step, then 1.0
    snapped_sqrt_alphas: torch.Tensor  # (n,) float32: what x0 = a x - sqrt(1-a^2) v uses
    snapped_index: np.ndarray  # (n,) int: the table entry each step snapped to

    @property
    def num_steps(self) -> int:
        return len(self.timesteps)


def released_schedule(num_steps: int = DEFAULT_STEPS) -> ReleasedSchedule:
    ac = shifted_alphas_cumprod()
    ts = released_timesteps(num_steps, len(ac))
    # Rescale over the chosen steps (clean -> noisy order), then put noisiest first.
    steps = torch.flip(_zero_snr_sqrt(ac[ts[::-1]]), (0,))
    table = _zero_snr_sqrt(ac)
    idx = (steps[None, :] - table[:, None]).abs().argmin(dim=0)
    return ReleasedSchedule(
        timesteps=ts,
        sqrt_alphas=torch.cat([steps, steps.new_ones(1)]),
        snapped_sqrt_alphas=table[idx],
        snapped_index=idx.numpy(),
    )


def dynamic_cfg_scale(
    timestep: int,
    sampler_steps: int = DEFAULT_STEPS,
    scale: float = GUIDANCE["scale"],
    exp: int = GUIDANCE["exp"],
    guider_steps: int = GUIDANCE["num_steps"],
) -> float:
    """The released DynamicCFG weight, computed from the DDPM index as the release does.

    The release passes `step_index = sampler_steps - t` (t = 999, 979, ...), so the cosine wave runs
    over large negative values; this is the schedule its weights were tuned with, kept as is.
    """
    step_index = sampler_steps - int(timestep)
    return 1 + scale * (1 - math.cos(math.pi * (step_index / guider_steps) ** exp)) / 2


def stock_scheduler(num_steps: int = DEFAULT_STEPS) -> CogVideoXDPMScheduler:
    # from_config is typed to return (scheduler, unused kwargs) too, which it does only when asked.
    sched = cast(CogVideoXDPMScheduler, CogVideoXDPMScheduler.from_config(STOCK_SCHEDULER_CONFIG))
    sched.set_timesteps(num_steps)
    return sched
