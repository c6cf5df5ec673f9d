"""Previews while sampling, on the tiny decoder: the diffusers-shaped step callback, the latent ->
RGB map fitted from the VAE, the previews approaching the clip, and a clip unchanged by them."""

from __future__ import annotations

import concurrent.futures
import io
import json

import numpy as np
import pytest
import torch
from PIL import Image

from contracts.turn import Progress
from inference.backends.clip_batch import decode_together
from inference.decoder.latent_preview import FILE_NAME, LatentRGB, fit_latent_rgb, load_or_fit
from inference.decoder.sampler import SeededNoise
from inference.decoder.vae import decode_latents
from inference.mp4 import encode_mp4
from inference.previews import MAX_BYTES, MAX_SIDE, PreviewPolicy, Still, TurnPreviews, still
from testkit.tiny.decoder import random_tiny_decoder

EVERY_STEP = PreviewPolicy(min_interval=0.0, max_per_turn=1000)


def _reps(n: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 226, width)).astype(np.float32)


class _Inline(concurrent.futures.Executor):
    """Makes each still at once, so that which steps get one does not depend on thread timing."""

    def submit(self, fn, /, *args, **kwargs):
        f: concurrent.futures.Future = concurrent.futures.Future()
        f.set_result(fn(*args, **kwargs))
        return f


class _Collect:
    """A preview sink collecting each clip's stills: made in a real previews thread, or inline."""

    def __init__(self, policy: PreviewPolicy, inline: bool = False) -> None:
        self.executor = _Inline() if inline else concurrent.futures.ThreadPoolExecutor(1)
        self.stills: list[Still] = []
        self.previews = TurnPreviews(1, self.stills.append, self.executor, policy)

    def wait(self) -> list[Still]:
        self.executor.shutdown(wait=True)
        return self.stills


def _pixels(data: bytes, size: tuple[int, int]) -> np.ndarray:
    img = Image.open(io.BytesIO(data))
    assert img.format == "WEBP"
    return np.asarray(img.convert("RGB").resize((size[1], size[0]), Image.Resampling.BILINEAR)).astype(np.float64)


def test_step_callback_follows_diffusers_convention():
    dec = random_tiny_decoder(steps=4)
    calls = []

    def cb(pipe, step_index, timestep, callback_kwargs):
        calls.append((pipe, step_index, timestep, sorted(callback_kwargs), pipe.num_timesteps))
        return {}

    rep = _reps(1, dec.context_shape[1])
    plain = dec.decode_batch(rep, [2.0], [3])
    hooked = dec.decode_batch(rep, [2.0], [3], callback_on_step_end=cb, callback_on_step_end_tensor_inputs=("latents", "x0"))
    assert np.array_equal(plain, hooked)
    assert [c[1] for c in calls] == [0, 1, 2, 3]
    assert all(c[0] is dec and c[3] == ["latents", "x0"] and c[4] == 4 for c in calls)
    assert [c[2] for c in calls] == sorted((c[2] for c in calls), reverse=True) and calls[0][2] == 999
    with pytest.raises(ValueError, match="callback_on_step_end_tensor_inputs"):
        dec.decode_batch(rep, [2.0], [3], callback_on_step_end=cb, callback_on_step_end_tensor_inputs=("prompt_embeds",))


def test_a_step_callback_may_replace_the_latents():
    dec = random_tiny_decoder(steps=3)
    rep = _reps(1, dec.context_shape[1])

    def zero_after_first(pipe, step_index, timestep, kw):
        return {"latents": torch.zeros_like(kw["latents"])} if step_index == 0 else {}

    base = dec.sample_latents(torch.from_numpy(rep), [2.0], SeededNoise([1], dec.latent_shape))
    replaced = dec.sample_latents(torch.from_numpy(rep), [2.0], SeededNoise([1], dec.latent_shape), None, zero_after_first)
    assert not torch.equal(base, replaced)


def test_clip_is_byte_identical_with_previews_on_and_off():
    dec = random_tiny_decoder(steps=6)
    rep = _reps(1, dec.context_shape[1], seed=4)[0]
    off = decode_together(dec, [(rep, 3.0, 77, lambda f, s: None)])[0][0]
    sink = _Collect(EVERY_STEP)
    on = decode_together(dec, [(rep, 3.0, 77, Progress(lambda f, s: None, sink.previews))])[0][0]
    made = sink.wait()
    assert made and made[0].step == 1  # previews really were made, in their thread, during this run
    assert off is not None and on is not None
    assert encode_mp4(on, fps=8) == encode_mp4(off, fps=8)


def test_previews_differ_step_to_step_and_approach_the_clip():
    """Eight clips decoded as one batch, each with its own previews (the default policy, minus the
    5 s gap the tiny model never reaches). A random tiny DiT's clean-latent estimates wander from
    step to step where a trained one's settle, so the approach is measured over the eight clips;
    each clip's last preview is nearer its first frame than its first preview."""
    dec = random_tiny_decoder(steps=20)
    n = 8
    reps = _reps(n, dec.context_shape[1])
    sinks = [_Collect(PreviewPolicy(min_interval=0.0), inline=True) for _ in range(n)]
    items = [(reps[i], 2.0, i, Progress(lambda f, s: None, sinks[i].previews)) for i in range(n)]
    outcomes = decode_together(dec, items)
    distances = []
    for i, sink in enumerate(sinks):
        stills = sink.wait()
        assert [s.step for s in stills] == [4, 8, 12, 16] and [s.number for s in stills] == [1, 2, 3, 4]
        assert all(s.total == 20 and len(s.data) <= MAX_BYTES for s in stills)
        frames = outcomes[i][0]
        assert frames is not None
        pics = [_pixels(s.data, frames.shape[1:3]) for s in stills]
        assert all(np.abs(a - b).mean() > 0.5 for a, b in zip(pics, pics[1:], strict=False))  # they change
        distances.append([np.abs(p - frames[0]).mean() for p in pics])
    d = np.asarray(distances)
    assert (d[:, -1] < d[:, 0]).all(), d.round(2)
    mean = d.mean(axis=0)
    assert (np.diff(mean) < 0).all(), mean.round(3)


def test_policy_spreads_at_most_max_previews_and_keeps_the_interval():
    p = PreviewPolicy(min_interval=5.0, max_per_turn=4)
    assert [s for s in range(1, 51) if p.due(s, 50, made=len([x for x in range(10, s, 10)]), since_last=10.0)] == [10, 20, 30, 40]
    assert not p.due(10, 50, made=0, since_last=4.9)  # too soon after the turn's start or the last one
    assert not p.due(50, 50, made=0, since_last=100.0)  # never the last step: the clip follows
    assert not p.due(45, 50, made=4, since_last=100.0)


def test_a_busy_previews_thread_skips_and_a_failure_is_logged_once(caplog):
    class Clock:
        t = 0.0

        def __call__(self):
            return self.t

    clock, got = Clock(), []
    pool = concurrent.futures.ThreadPoolExecutor(1)
    tp = TurnPreviews(5, got.append, pool, PreviewPolicy(min_interval=1.0, max_per_turn=10), clock=clock)
    tp.offer(1, 10, lambda: np.zeros((8, 8, 3), np.uint8))  # 0 s into the turn: not yet
    assert tp.made == 0
    clock.t = 2.0

    def broken():
        raise RuntimeError("no picture")

    tp.offer(2, 10, broken)
    tp.offer(3, 10, broken)
    assert tp.made == 0 and len([r for r in caplog.records if "turn 5" in r.message]) == 1
    tp.offer(4, 10, lambda: np.full((8, 8, 3), 200, np.uint8))
    pool.shutdown(wait=True)
    assert [s.step for s in got] == [4]


def test_still_is_a_small_webp_of_capped_side():
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, 256, (480, 720, 3), dtype=np.uint8)  # worst case for a codec
    data = still(noisy)
    img = Image.open(io.BytesIO(data))
    assert img.format == "WEBP" and max(img.size) <= MAX_SIDE and len(data) <= MAX_BYTES
    small = still(torch.zeros(3, 4, 6))  # a latent-sized picture is scaled up
    assert Image.open(io.BytesIO(small)).size == (MAX_SIDE, 240)
    with pytest.raises(ValueError):
        still(np.zeros((4, 4), np.uint8))


def test_fitted_map_reproduces_a_linear_decoder_and_round_trips(tmp_path):
    dec = random_tiny_decoder()
    fitted = fit_latent_rgb(dec.vae)
    assert fitted.weight.shape == (4, 3) and np.isfinite(fitted.weight).all()
    # The fit is the best linear map: on the VAE's own decodes it beats the constant mean colour.
    z = torch.randn(2, 5, 4, 4, 6, generator=torch.Generator().manual_seed(3))
    frame = torch.nn.functional.avg_pool2d(decode_latents(dec.vae, z)[:, :, 0].float(), 8)
    err = (torch.stack([fitted.project(z[b, 0]) for b in range(2)]) - frame).pow(2).mean()
    assert err < (frame - frame.mean(dim=(0, 2, 3), keepdim=True)).pow(2).mean()
    fitted.save(str(tmp_path))
    assert json.loads((tmp_path / FILE_NAME).read_text())["format"] == "animegamer-latent-rgb"
    again = LatentRGB.load(str(tmp_path))
    assert again is not None and np.array_equal(again.weight, fitted.weight)
    assert np.array_equal(load_or_fit(str(tmp_path), dec.vae).bias, fitted.bias)
    assert LatentRGB.load(str(tmp_path / "nothing")) is None
