"""Sampling loops: the released DPM++ 2M SDE update (default) and diffusers' CogVideoXDPMScheduler.

Both take a `model_fn(x, t) -> (v_uncond, v_cond)` (float32, x float32 (B, T, C, h, w)) and apply
dynamic classifier-free guidance with the released weight (schedule.dynamic_cfg_scale).

The released update, step by step (VPSDEDPMPP2MSampler with VideoScaling and DiscreteDenoiser):
- x_T is one unscaled standard-normal draw.
- x0 = a' x - sqrt(1 - a'^2) v per branch, with a' the step's sqrt(alpha_bar) snapped to the
  1000-step table, then x0 = x0_u + w (x0_c - x0_u). The DiT itself receives t.
- With a, a_next, a_prev the step's (unsnapped) sqrt(alpha_bar) and lambda = log(a / sqrt(1-a^2)):
  h = lambda_next - lambda, m1 = sqrt((1-a_next^2)/(1-a^2)) e^-h, m2 = expm1(-2h) a_next,
  noise scale sqrt(1-a_next^2) sqrt(1-e^-2h).
  Step 0: x = m1 x - m2 x0 + s eps (one draw). Later steps draw once, discard it (the release
  computes a first-order candidate it throws away), then with r = h_prev / h use
  x0_d = (1 + 1/2r) x0 - (1/2r) x0_prev and x = m1 x - m2 x0_d + s eps (second draw).
  The last step returns x0 without noise.
All coefficient math is float32 on 0-d tensors, like the release (whose step 0 has a = 0, so
lambda = -inf and h = +inf: the infinities resolve to m1 = 0, m2 = -a_next, r = inf).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import torch

from .schedule import DEFAULT_STEPS, GUIDANCE, ReleasedSchedule, dynamic_cfg_scale, released_schedule, stock_scheduler

ModelFn = Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]]
StepCallback = Callable[[int, int], None]  # (steps done, total)
# After each step: (step index, timestep, {"latents": x, "x0": the guided clean estimate}); may
# return replacements ({"latents": ...}) as diffusers' callback_on_step_end may.
StepEnd = Callable[[int, int, dict[str, torch.Tensor]], "dict[str, torch.Tensor] | None"]


def _step_end(on_step_end: StepEnd | None, i: int, t: int, x: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
    if on_step_end is None:
        return x
    out = on_step_end(i, t, {"latents": x, "x0": x0}) or {}
    return out.get("latents", x)


@dataclass(frozen=True)
class Guidance:
    scale: float = GUIDANCE["scale"]
    exp: int = GUIDANCE["exp"]
    guider_steps: int = GUIDANCE["num_steps"]  # the guider's own constant in the released config

    def weight(self, timestep: int, sampler_steps: int) -> float:
        return dynamic_cfg_scale(timestep, sampler_steps, self.scale, self.exp, self.guider_steps)


DEFAULT_GUIDANCE = Guidance()  # the released guidance (one frozen instance for default arguments)


class SeededNoise:
    """Standard-normal draws of one latent shape, each batch row from its own seeded generator.

    Rows are drawn on the CPU, so a seed gives the same clip on any device and whatever the
    batch it is decoded in.
    """

    def __init__(self, seeds: Sequence[int], shape: Sequence[int], device: torch.device | str = "cpu"):
        self.generators = [torch.Generator("cpu").manual_seed(int(s)) for s in seeds]
        self.shape = tuple(shape)
        self.device = torch.device(device)

    def draw(self) -> torch.Tensor:
        rows = [torch.randn(self.shape, generator=g, dtype=torch.float32) for g in self.generators]
        return torch.stack(rows).to(self.device)


class ReplayNoise:
    """Injected noise: the given tensors, in the order the sampler draws them."""

    def __init__(self, tensors: Iterable[torch.Tensor]):
        self._it: Iterator[torch.Tensor] = iter(tensors)
        self.used = 0

    def draw(self) -> torch.Tensor:
        try:
            t = next(self._it)
        except StopIteration:
            raise RuntimeError(f"replayed noise exhausted after {self.used} draws") from None
        self.used += 1
        return t.to(torch.float32)


def released_draw_count(num_steps: int) -> int:
    """Draws one released run makes: x_T, one at step 0, two at each middle step, none at the last."""
    return 1 + (1 if num_steps > 1 else 0) + 2 * max(num_steps - 2, 0)


def _lambda(a: torch.Tensor) -> torch.Tensor:
    ac = a**2
    return ((ac / (1 - ac)) ** 0.5).log()


def _guided_x0(v_u, v_c, x, a_snapped, w) -> torch.Tensor:
    c_out = -((1 - a_snapped**2) ** 0.5)
    x0_u = v_u.float() * c_out + x * a_snapped
    x0_c = v_c.float() * c_out + x * a_snapped
    return x0_u + w * (x0_c - x0_u)


def sample_released(
    model_fn: ModelFn,
    noise,
    num_steps: int = DEFAULT_STEPS,
    guidance: Guidance = DEFAULT_GUIDANCE,
    on_step: StepCallback | None = None,
    schedule: ReleasedSchedule | None = None,
    on_step_end: StepEnd | None = None,
) -> torch.Tensor:
    """Run the released sampler; `noise.draw()` supplies x_T and every step's noise."""
    sched = schedule or released_schedule(num_steps)
    n = sched.num_steps
    a_all = sched.sqrt_alphas
    x = noise.draw()
    old_x0 = None
    for i, t in enumerate(sched.timesteps.tolist()):
        v_u, v_c = model_fn(x, t)
        x0 = _guided_x0(v_u, v_c, x, sched.snapped_sqrt_alphas[i], guidance.weight(t, n))
        if i == n - 1:
            x = x0
        else:
            a, a_next = a_all[i], a_all[i + 1]
            lam, lam_next = _lambda(a), _lambda(a_next)
            h = lam_next - lam
            m1 = ((1 - a_next**2) / (1 - a**2)) ** 0.5 * (-h).exp()
            m2 = (-2 * h).expm1() * a_next
            s = (1 - a_next**2) ** 0.5 * (1 - (-2 * h).exp()) ** 0.5
            x_first_order = m1 * x - m2 * x0 + s * noise.draw()
            if old_x0 is None:
                x = x_first_order
            else:
                r = (lam - _lambda(a_all[i - 1])) / h
                x0_d = (1 + 1 / (2 * r)) * x0 - (1 / (2 * r)) * old_x0
                x = m1 * x - m2 * x0_d + s * noise.draw()
            old_x0 = x0
        x = _step_end(on_step_end, i, t, x, x0)
        if on_step is not None:
            on_step(i + 1, n)
    return x


class _StockStep(Protocol):
    """CogVideoXDPMScheduler.step as it is called here. diffusers annotates the previous x0 and
    timestep as always given and the generator as one, but its own pipeline passes None for both at
    the first step, and the noise is drawn by randn_tensor, which takes one generator per row."""

    def __call__(
        self,
        model_output: torch.Tensor,
        old_pred_original_sample: torch.Tensor | None,
        timestep: int,
        timestep_back: int | None,
        sample: torch.Tensor,
        *,
        generator: list[torch.Generator],
        return_dict: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


def sample_stock(
    model_fn: ModelFn,
    noise: SeededNoise,
    num_steps: int = DEFAULT_STEPS,
    guidance: Guidance = DEFAULT_GUIDANCE,
    on_step: StepCallback | None = None,
    on_step_end: StepEnd | None = None,
) -> torch.Tensor:
    """diffusers' CogVideoXDPMScheduler (as the stock CogVideoX pipeline drives it), guiding v.

    The scheduler draws its step noise itself, from the per-row generators of a SeededNoise.
    """
    if not isinstance(noise, SeededNoise):
        raise TypeError("the stock scheduler draws its own step noise: pass a SeededNoise")
    sched = stock_scheduler(num_steps)
    step = cast(_StockStep, sched.step)
    x = noise.draw() * sched.init_noise_sigma
    old_x0 = None
    timesteps = sched.timesteps.tolist()
    for i, t in enumerate(timesteps):
        v_u, v_c = model_fn(x, t)
        w = guidance.weight(t, num_steps)
        v = v_u.float() + w * (v_c.float() - v_u.float())
        x, old_x0 = step(
            v,
            old_x0,
            t,
            timesteps[i - 1] if i > 0 else None,
            x,
            generator=noise.generators,
            return_dict=False,
        )
        x = _step_end(on_step_end, i, t, x, old_x0)
        if on_step is not None:
            on_step(i + 1, num_steps)
    return x
