"""Timesteps, sqrt(alpha_bar) tables and guidance weights against the released schedule."""

from __future__ import annotations

import math

import decoder_sat_reference as ref
import numpy as np
import torch

from inference.decoder.sampler import Guidance
from inference.decoder.schedule import (
    dynamic_cfg_scale,
    released_schedule,
    released_timesteps,
    stock_scheduler,
    table_sqrt_alphas_cumprod,
)


def test_released_timesteps_are_trailing_and_match_the_stock_scheduler():
    expected = 999 - 20 * np.arange(50)  # 999, 979, ..., 19
    np.testing.assert_array_equal(released_timesteps(50), expected)
    np.testing.assert_array_equal(stock_scheduler(50).timesteps.numpy(), expected)
    np.testing.assert_array_equal(released_timesteps(4), [999, 749, 499, 249])


def test_sqrt_alpha_tables_match_the_released_discretization():
    sched = released_schedule(50)
    ts, steps, snapped = ref.released_tables(50)
    np.testing.assert_array_equal(sched.timesteps, ts)
    np.testing.assert_allclose(sched.sqrt_alphas[:50].double().numpy(), steps, atol=2e-6)
    assert sched.sqrt_alphas[0] == 0.0 and sched.sqrt_alphas[-1] == 1.0  # zero terminal SNR; then clean
    np.testing.assert_allclose(sched.snapped_sqrt_alphas.double().numpy(), snapped, atol=2e-6)


def test_denoiser_snaps_to_the_previous_table_entry_for_the_last_eight_steps():
    sched = released_schedule(50)
    t = sched.timesteps
    np.testing.assert_array_equal(sched.snapped_index, np.where(t <= 159, t - 1, t))
    assert (t <= 159).sum() == 8


def test_released_step_table_differs_from_the_stock_1000_step_table_by_about_1e3():
    sched = released_schedule(50)
    stock = stock_scheduler(50).alphas_cumprod.sqrt()
    table = table_sqrt_alphas_cumprod()
    # The 1000-step table is the stock scheduler's (same formula).
    torch.testing.assert_close(table.double(), stock.double(), atol=1e-6, rtol=0)
    diff = (sched.sqrt_alphas[:50].double() - stock[sched.timesteps].double()).abs().max().item()
    assert 1e-4 < diff < 2e-3


def test_dynamic_guidance_weights_follow_the_released_formula_by_timestep():
    for t in released_timesteps(50):
        step_index = 50 - int(t)  # what the release passes as step_index
        expected = 1 + 6 * (1 - math.cos(math.pi * (step_index / 50) ** 5)) / 2
        assert dynamic_cfg_scale(int(t)) == expected
        assert Guidance().weight(int(t), 50) == expected
    # A few values written out (the wave over large negative arguments is what the release runs).
    assert math.isclose(dynamic_cfg_scale(999), 2.2914874, abs_tol=1e-6)
    assert math.isclose(dynamic_cfg_scale(979), 2.5435033, abs_tol=1e-6)
    assert math.isclose(dynamic_cfg_scale(19), 1.1233981, abs_tol=1e-6)
    # Between 1 and 1 + scale.
    assert all(1.0 <= dynamic_cfg_scale(int(t)) <= 7.0 for t in released_timesteps(50))
