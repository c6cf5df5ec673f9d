"""The decoder's training objective against its definition (independent numpy/float64 formulas)."""

from __future__ import annotations

import numpy as np
import torch

from inference.decoder.schedule import released_schedule
from training.diffusion import (
    NUM_TIMESTEPS,
    NoiseSchedule,
    drop_features,
    drop_masks,
    drop_representation,
    sample_timesteps,
    v_loss,
)

torch.set_num_threads(1)


def reference_sqrt_alpha_bar() -> np.ndarray:
    """Scaled-linear betas 0.00085..0.012, SNR shift 3, sqrt rescaled to zero terminal SNR."""
    betas = np.linspace(0.00085**0.5, 0.012**0.5, 1000) ** 2
    ac = np.cumprod(1 - betas)
    ac = ac / (3 - 2 * ac)
    s = np.sqrt(ac)
    return (s - s[-1]) * s[0] / (s[0] - s[-1])


def test_schedule_is_the_released_one_with_zero_terminal_snr():
    sched = NoiseSchedule.released()
    assert sched.sqrt_alpha_bar.shape == (NUM_TIMESTEPS,)
    np.testing.assert_allclose(sched.sqrt_alpha_bar.numpy(), reference_sqrt_alpha_bar(), rtol=1e-5, atol=1e-6)
    assert float(sched.alpha_bar[-1]) == 0.0  # zero terminal SNR: pure noise at t = 999
    assert torch.all(sched.alpha_bar[1:] < sched.alpha_bar[:-1])
    # the sampler's denoiser snaps to entries of this very table
    rs = released_schedule(50)
    torch.testing.assert_close(rs.snapped_sqrt_alphas, sched.sqrt_alpha_bar[torch.from_numpy(rs.snapped_index)])


def test_v_target_and_its_inverse():
    sched = NoiseSchedule.released()
    g = torch.Generator().manual_seed(0)
    x0, noise = torch.randn(4, 5, 3, 2, 2, generator=g), torch.randn(4, 5, 3, 2, 2, generator=g)
    t = torch.tensor([0, 250, 998, 999])
    a = torch.from_numpy(reference_sqrt_alpha_bar()).float()[t].view(-1, 1, 1, 1, 1)
    s = (1 - a**2).sqrt()
    x_t = sched.add_noise(x0, noise, t)
    v = sched.v_target(x0, noise, t)
    torch.testing.assert_close(x_t, a * x0 + s * noise, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v, a * noise - s * x0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x_t[3], noise[3])  # t = 999: nothing of the clip is left
    torch.testing.assert_close(v[3], -x0[3])  # and v is -x0: the model must predict the clip
    torch.testing.assert_close(sched.x0_from_v(x_t, v, t), x0, rtol=1e-4, atol=1e-4)
    # The released loss (x0 error weighted 1 / (1 - alpha_bar)) equals the v loss where it is finite.
    v_pred = v + 0.1 * torch.randn(v.shape, generator=g)
    x0_pred = sched.x0_from_v(x_t, v_pred, t)
    w = 1 / (1 - a**2)
    released = (w[1:] * (x0_pred[1:] - x0[1:]) ** 2).mean()
    torch.testing.assert_close(released, v_loss(v_pred[1:], v[1:]), rtol=1e-4, atol=1e-6)


def test_timesteps_cover_the_range_uniformly():
    t = sample_timesteps(20000, "cpu", torch.Generator().manual_seed(0))
    assert int(t.min()) == 0 and int(t.max()) == 999
    counts = torch.bincount(t // 100, minlength=10).float()
    assert torch.all((counts - 2000).abs() < 200)  # each tenth of the range ~10 %


def test_condition_dropout_rates_and_what_a_drop_is():
    n = 40000
    drop_t, drop_i = drop_masks(n, "cpu", generator=torch.Generator().manual_seed(1))
    for m in (drop_t, drop_i):
        assert abs(m.float().mean().item() - 0.05) < 0.005
    both = (drop_t & drop_i).float().mean().item()  # independent: 0.05^2
    assert abs(both - 0.0025) < 0.0015
    text, image = torch.ones(3, 4, 2), torch.ones(3, 5, 2)
    dt, di = torch.tensor([True, False, False]), torch.tensor([False, True, False])
    t2, i2 = drop_features(text, image, dt, di)
    assert t2[0].abs().sum() == 0 and t2[1:].eq(1).all()
    assert i2[1].abs().sum() == 0 and i2[[0, 2]].eq(1).all()
    rep, uncond = torch.ones(3, 226, 4), torch.full((226, 4), 7.0)
    out = drop_representation(rep, uncond, dt, di)
    assert out[0, :30].eq(7).all() and out[0, 30:].eq(1).all()  # text rows from the unconditional tokens
    assert out[1, :30].eq(1).all() and out[1, 30:].eq(7).all()  # image rows
    assert out[2].eq(1).all()
