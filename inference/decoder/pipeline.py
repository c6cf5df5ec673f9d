"""AnimeGamerDecoder: representation (226 x 1920) + motion scope + seed -> 17 frames of 480x720.

Own sampling loop rather than diffusers' CogVideoXPipeline, which can pass neither the motion
scope nor precomputed context tokens. Satisfies inference.backend.ClipDecoder; MP4 encoding is the
backend's (one place), not the decoder's.

Steps follow diffusers' pipeline convention: `callback_on_step_end(pipe, step_index, timestep,
callback_kwargs)` after each step, with the tensors named in `callback_on_step_end_tensor_inputs`
("latents", and "x0": the step's guided estimate of the clean latents); it may return a
replacement for "latents". `preview_rgb` turns an x0 into a rough picture (latent_preview).

Several sessions' clips are decoded as one batch (`decode_batch`: B sessions x 2 guidance
branches per DiT forward); a lock keeps two calls from sharing the GPU unbatched, and each call
returns its own timings.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from contracts.turn import ProgressCallback

from .diffusers_api import AutoencoderKLCogVideoX, cache_context, dit_config, reset_cache_state, to_device, vae_config
from .latent_preview import LatentRGB, fit_latent_rgb, load_or_fit
from .sampler import DEFAULT_GUIDANCE, Guidance, SeededNoise, StepEnd, sample_released, sample_stock
from .schedule import DEFAULT_STEPS
from .speed import SpeedReport, apply_speed
from .transformer import AnimeGamerTransformer3DModel
from .vae import decode_latents, to_uint8_frames

log = logging.getLogger(__name__)

SAMPLERS = ("released", "stock")
DENOISE_SHARE = 0.9  # of a clip's progress; the VAE takes the rest
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
# callback_on_step_end(pipe, step_index, timestep, callback_kwargs) -> replacements or None
StepCallback = Callable[["AnimeGamerDecoder", int, int, dict[str, torch.Tensor]], "dict[str, torch.Tensor] | None"]


class AnimeGamerDecoder:
    callback_tensor_inputs = ("latents", "x0")  # what a step callback may ask for (diffusers: _callback_tensor_inputs)

    def __init__(
        self,
        transformer: AnimeGamerTransformer3DModel,
        vae: AutoencoderKLCogVideoX,
        steps: int = DEFAULT_STEPS,
        sampler: str = "released",
        guidance: Guidance = DEFAULT_GUIDANCE,
        num_latent_frames: int = 5,
        height: int = 480,
        width: int = 720,
        fps: int = 8,
        preview_map: LatentRGB | None = None,
    ):
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
        self.transformer = transformer.eval()
        transformer.keep_position_table_in_weights_dtype()
        self.vae = vae.eval()
        self.steps = int(steps)
        self.sampler = sampler
        self.guidance = guidance
        self.fps = int(fps)
        self.num_latent_frames = num_latent_frames
        dit = dit_config(transformer)
        spatial = 2 ** (len(vae_config(vae).block_out_channels) - 1)
        if height % (spatial * dit.patch_size) or width % (spatial * dit.patch_size):
            raise ValueError(f"{height}x{width} is not a multiple of {spatial * dit.patch_size}")
        self.frame_size = (height, width)
        self.latent_shape = (num_latent_frames, dit.in_channels, height // spatial, width // spatial)
        self.context_shape = (dit.max_text_seq_length, dit.text_embed_dim)
        self.speed_report = SpeedReport("exact")  # set by prepare()
        self._gpu = threading.Lock()  # one decode at a time: concurrent turns come as one batch
        self.preview_map = preview_map  # fitted on first use if not given (load_decoder gives it)
        self.preview_unavailable: str | None = None  # why there is no map, when load_decoder could not fit one
        self._num_timesteps = self.steps

    @property
    def num_timesteps(self) -> int:
        """Steps of the current (or last) sampling run, as diffusers' pipelines say it."""
        return self._num_timesteps

    def preview_rgb(self, x0: torch.Tensor, frame: int = 0) -> torch.Tensor:
        """A rough picture of one clip's `frame` from a clean-latent estimate (1, T, C, h, w) or
        (T, C, h, w): (3, h, w) in about [-1, 1], on the latents' device, made without the VAE."""
        if self.preview_map is None:
            if self.preview_unavailable:  # the preview maker skips the turn's previews and logs this once
                raise RuntimeError(self.preview_unavailable)
            self.preview_map = fit_latent_rgb(self.vae)
        frames = x0[0] if x0.dim() == 5 else x0
        return self.preview_map.project(frames[frame])

    @property
    def device(self) -> torch.device:
        return self.transformer.device

    def decode(
        self,
        representation: np.ndarray,
        motion_scope: float,
        seed: int,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """One clip as uint8 (T, H, W, 3)."""
        return self.decode_batch([representation], [motion_scope], [seed], progress)[0]

    def decode_batch(
        self,
        representations: Sequence[np.ndarray] | np.ndarray,
        motion_scopes: Sequence[float],
        seeds: Sequence[int],
        progress: ProgressCallback | None = None,
        callback_on_step_end: StepCallback | None = None,
        callback_on_step_end_tensor_inputs: Sequence[str] = ("latents",),
    ) -> np.ndarray:
        """B clips at once as uint8 (B, T, H, W, 3); row i equals decode(rep_i, scope_i, seed_i)."""
        return self.decode_batch_timed(representations, motion_scopes, seeds, progress,
                                       callback_on_step_end, callback_on_step_end_tensor_inputs)[0]

    def decode_batch_timed(
        self,
        representations: Sequence[np.ndarray] | np.ndarray,
        motion_scopes: Sequence[float],
        seeds: Sequence[int],
        progress: ProgressCallback | None = None,
        callback_on_step_end: StepCallback | None = None,
        callback_on_step_end_tensor_inputs: Sequence[str] = ("latents",),
    ) -> tuple[np.ndarray, dict[str, float]]:
        """decode_batch, plus this call's timings: seconds of denoise and vae, the batch size, and
        the seconds spent waiting for the GPU lock. callback_on_step_end: see the module's doc."""
        reps = np.asarray(representations, dtype=np.float32)
        b = reps.shape[0]
        if reps.shape[1:] != self.context_shape:
            raise ValueError(f"representation must be {self.context_shape}, got {reps.shape[1:]}")
        if not (len(motion_scopes) == len(seeds) == b):
            raise ValueError("one motion scope and one seed per representation")
        waited = time.perf_counter()
        with self._gpu:
            t0 = time.perf_counter()
            noise = SeededNoise(seeds, self.latent_shape, self.device)
            latents = self.sample_latents(torch.from_numpy(reps), motion_scopes, noise, progress,
                                          callback_on_step_end, callback_on_step_end_tensor_inputs)
            if latents.is_cuda:  # honest stage timings
                torch.cuda.synchronize(latents.device)
            t1 = time.perf_counter()
            if progress is not None:
                progress(DENOISE_SHARE, "vae")
            frames = to_uint8_frames(decode_latents(self.vae, latents.to(self.vae.device)))
            if frames.shape[2:4] != self.frame_size:  # e.g. a VAE tiling that does not fit the size
                raise RuntimeError(f"the VAE produced {frames.shape[2]}x{frames.shape[3]} frames, expected "
                                   f"{self.frame_size[0]}x{self.frame_size[1]}")
            if progress is not None:
                progress(1.0, "vae")
            t2 = time.perf_counter()
        return frames, {"denoise": t1 - t0, "vae": t2 - t1, "batch": float(b), "gpu_wait": t0 - waited}

    def warm_up(self, batch_sizes: Sequence[int] = (1,)) -> float:
        """Decode throw-away clips of 2 steps at these batch sizes, so that a compiled preset's
        compiles happen at load rather than in a player's first turn; returns the seconds spent."""
        t0, steps = time.perf_counter(), self.steps
        self.steps = 2
        try:
            for b in batch_sizes:
                self.decode_batch(np.zeros((b, *self.context_shape), np.float32), [1.0] * b, list(range(b)))
        finally:
            self.steps = steps
        return time.perf_counter() - t0

    @torch.no_grad()
    def sample_latents(
        self,
        representations: torch.Tensor,
        motion_scopes: Sequence[float],
        noise,
        progress: ProgressCallback | None = None,
        callback_on_step_end: StepCallback | None = None,
        callback_on_step_end_tensor_inputs: Sequence[str] = ("latents",),
    ) -> torch.Tensor:
        """Latents (B, T, C, h, w) from contexts (B, 226, D); `noise.draw()` supplies all randomness."""
        on_step_end = self._step_end(callback_on_step_end, callback_on_step_end_tensor_inputs)
        b = representations.shape[0]
        device = self.device
        # Batch layout of the release's guider: all unconditional rows, then all conditional ones.
        uncond = self.transformer.uncond_embedding.to(device)
        context = torch.cat([uncond.expand(b, -1, -1), representations.to(device, uncond.dtype)])
        scope = torch.tensor(list(motion_scopes) * 2, dtype=torch.float32, device=device)

        def model_fn(x: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
            timestep = torch.full((2 * b,), t, dtype=torch.long, device=device)
            with cache_context(self.transformer):  # a no-op unless a speed preset enabled a cache
                v = self.transformer.predict_v(torch.cat([x, x]), context, timestep, scope)
            v_uncond, v_cond = v.float().chunk(2)
            return v_uncond, v_cond

        def on_step(done: int, total: int) -> None:
            if progress is not None:
                progress(DENOISE_SHARE * done / total, f"denoise {done}/{total}")

        self._num_timesteps = self.steps
        try:
            if self.sampler == "released":
                return sample_released(model_fn, noise, self.steps, self.guidance, on_step, on_step_end=on_step_end)
            return sample_stock(model_fn, noise, self.steps, self.guidance, on_step, on_step_end=on_step_end)
        finally:
            reset_cache_state(self.transformer)  # the next clip starts from nothing cached

    def _step_end(self, callback: StepCallback | None, tensor_inputs: Sequence[str]) -> StepEnd | None:
        """The sampler's per-step hook calling a diffusers-shaped callback with the named tensors. A
        callback object with `tensor_inputs` (diffusers' PipelineCallback) names its own."""
        if callback is None:
            return None
        names = tuple(getattr(callback, "tensor_inputs", None) or tensor_inputs)
        unknown = [n for n in names if n not in self.callback_tensor_inputs]
        if unknown:
            raise ValueError(f"callback_on_step_end_tensor_inputs must be among {self.callback_tensor_inputs}, got {unknown}")

        def on_step_end(i: int, t: int, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
            return callback(self, i, t, {n: tensors[n] for n in names})

        return on_step_end


def compiles(decoder) -> bool:
    """Whether the decoder's speed preset compiles (every preset but `exact`)."""
    report = getattr(decoder, "speed_report", None)
    return report is not None and report.speed != "exact"


def warm_up_compiled(decoder, max_batch: int) -> float:
    """Compile a decoder whose speed preset compiles, at the batch sizes a worker decodes (1 and its
    most concurrent turns), before any player waits on it; returns the seconds spent (0: nothing to do)."""
    if not compiles(decoder):
        return 0.0
    seconds = decoder.warm_up(sorted({1, max_batch}))
    log.info("decoder warmed up (%s) in %.1f s", decoder.speed_report.speed, seconds)
    return seconds


def _as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)} or a torch.dtype, got {dtype!r}")
    return DTYPES[dtype]


def load_decoder(
    model_dir: str,
    device: torch.device | str = "cuda",
    dtype: torch.dtype | str = torch.float16,
    steps: int = DEFAULT_STEPS,
    sampler: str = "released",
    vae_dtype: torch.dtype | str | None = None,
    attention_backend: str | None = None,
    speed: str = "exact",
    low_vram: bool = False,
    runs_on: torch.device | str | None = None,
) -> AnimeGamerDecoder:
    """Load a directory written by `animegamer convert-decoder`.

    dtype: the DiT's (the release runs it in fp16; the sampler math stays fp32). vae_dtype defaults
    to dtype. attention_backend: a diffusers backend name ("native", "flash", "_native_cudnn", ...),
    overriding the preset's. speed: a preset of inference.decoder.speed. low_vram: VAE tiling (less
    memory; tiles blend at their seams, so clips differ slightly); clips always go through the VAE
    one by one (`vae_memory_mode`). runs_on: the device it will decode on when loaded elsewhere (a
    multi-film worker's decoders, loaded on the CPU).
    """
    dtype = _as_dtype(dtype)
    vae_dtype = dtype if vae_dtype is None else _as_dtype(vae_dtype)
    settings_path = os.path.join(model_dir, "decoder.json")
    settings = {}
    if os.path.isfile(settings_path):
        with open(settings_path) as f:
            settings = json.load(f)
    transformer = AnimeGamerTransformer3DModel.from_pretrained(os.path.join(model_dir, "transformer"), torch_dtype=dtype)
    vae = AutoencoderKLCogVideoX.from_pretrained(os.path.join(model_dir, "vae"), torch_dtype=vae_dtype)
    decoder = AnimeGamerDecoder(
        transformer,
        vae,
        steps=steps,
        sampler=sampler,
        num_latent_frames=settings.get("num_latent_frames", 5),
        height=settings.get("height", 480),
        width=settings.get("width", 720),
        fps=settings.get("fps", 8),
    )
    prepare(decoder, device, speed=speed, low_vram=low_vram, attention_backend=attention_backend, runs_on=runs_on)
    try:
        decoder.preview_map = load_or_fit(model_dir, decoder.vae)  # after prepare: a fit runs where the VAE now is
    except Exception as e:  # previews are optional: a decoder whose map cannot be fitted still makes clips
        decoder.preview_unavailable = f"no preview map for the decoder in {model_dir}: fitting it failed ({e!r})"
        log.warning("%s; turns run without previews (convert the decoder again to store one)", decoder.preview_unavailable)
    return decoder


def vae_memory_mode(vae: AutoencoderKLCogVideoX, low_vram: bool) -> None:
    """Slicing always: a batch's clips go through the VAE one by one, so its activations, ~15 GiB
    per clip at 480x720 untiled, do not multiply with the sessions decoded together (4 sessions
    would need ~60 GiB), and a clip's frames no longer depend on the batch it was decoded in (a
    batched convolution rounds differently). low_vram adds tiling (tiles blend at their seams)."""
    vae.enable_slicing()
    if low_vram:
        vae.enable_tiling()


def prepare(
    decoder: AnimeGamerDecoder,
    device: torch.device | str,
    speed: str = "exact",
    low_vram: bool = False,
    attention_backend: str | None = None,
    compile_backend: str = "inductor",
    runs_on: torch.device | str | None = None,
) -> SpeedReport:
    """Move a decoder to `device` and apply a speed preset and the memory mode (once, after building);
    runs_on: the device it will decode on, if another (see speed.apply_speed)."""
    to_device(decoder.transformer, device)
    to_device(decoder.vae, device)
    vae_memory_mode(decoder.vae, low_vram)
    report = apply_speed(decoder.transformer, speed, compile_backend=compile_backend, runs_on=runs_on)
    if attention_backend:
        decoder.transformer.set_attention_backend(attention_backend)
        report.applied.append(f"attention backend {attention_backend}")
    decoder.speed_report = report
    log.info("decoder on %s%s, %s%s", device, f" (decodes on {runs_on})" if runs_on else "", report.summary(), ", low_vram (VAE tiled)" if low_vram else "")
    return report
