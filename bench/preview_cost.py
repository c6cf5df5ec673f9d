"""What a preview of the clip costs, by the two ways to make one from the clean-latent estimate:

- `project`: the latent -> RGB linear map (inference.decoder.latent_preview), 16 channels + 1 -> 3
  per latent pixel, then the still (inference.previews.still: scale up, WebP);
- `vae`: a decode of the first latent frame by the VAE at reduced size (latents halved: 30x45 ->
  240x360 frames at full size), then the still.

    python bench/preview_cost.py                 # tiny model timings + full-size FLOPs (meta device) + full-size CPU seconds
    python bench/preview_cost.py --no-full-run   # skip the full-size CPU runs (minutes on 2 threads)

FLOPs are counted by torch.utils.flop_counter on the real ops (convolutions and matmuls; the VAE's
norms and activations are not counted); seconds are this CPU's, median of --repeat runs.
Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
from inference.decoder.latent_preview import LatentRGB, fit_latent_rgb
from inference.decoder.vae import COGVIDEOX_VAE_CONFIG, decode_latents
from inference.previews import still


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def _reduced(frame: torch.Tensor) -> torch.Tensor:
    """(1, 1, C, h, w) latents -> half their size (the reduced-size VAE preview)."""
    return torch.nn.functional.interpolate(frame[:, 0], scale_factor=0.5, mode="area")[:, None]


def measure(vae: AutoencoderKLCogVideoX, latent_shape: tuple[int, int, int, int], repeat: int, label: str, run: bool = True) -> None:
    t, c, h, w = latent_shape
    x0 = torch.randn(1, t, c, h, w, generator=torch.Generator().manual_seed(0))
    rgb_map = LatentRGB(torch.randn(c, 3).numpy() * 0.1, torch.zeros(3).numpy())

    def project():
        return still(rgb_map.project(x0[0, 0]))

    def project_only():
        return rgb_map.project(x0[0, 0])

    def vae_frame():
        with torch.no_grad():
            return still(decode_latents(vae, _reduced(x0[:, :1]))[0, :, 0])

    proj_flops = 2 * h * w * c * 3 + 3 * h * w  # the einsum and the bias
    with torch.device("meta"):
        meta_vae = AutoencoderKLCogVideoX.from_config(vae.config).eval()
    with torch.no_grad():
        vae_flops = _flops(lambda: decode_latents(meta_vae, _reduced(x0[:, :1]).to("meta")))
    print(f"{label}: latents {c}x{h}x{w} per frame")
    print(f"  project: {proj_flops / 1e6:.2f} MFLOP", end="")
    if run:
        print(f", {_median_seconds(project_only, repeat) * 1000:.2f} ms, {_median_seconds(project, repeat) * 1000:.1f} ms "
              f"with the still ({len(project())} bytes)", end="")
    print()
    print(f"  vae (one latent frame at {h // 2}x{w // 2} -> {h * 4}x{w * 4}): {vae_flops / 1e9:.1f} GFLOP", end="")
    if run:
        print(f", {_median_seconds(vae_frame, repeat) * 1000:.1f} ms with the still", end="")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-full-run", action="store_true", help="full size: count FLOPs only")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} CPU threads")

    from testkit.tiny.decoder import TINY_VAE_CONFIG

    torch.manual_seed(0)
    tiny = AutoencoderKLCogVideoX(**TINY_VAE_CONFIG).eval()
    t0 = time.perf_counter()
    fit_latent_rgb(tiny)
    print(f"tiny: fitting the map took {time.perf_counter() - t0:.2f} s")
    measure(tiny, (5, 4, 4, 6), args.repeat, "tiny (32x48 frames)")

    full = AutoencoderKLCogVideoX(**COGVIDEOX_VAE_CONFIG).eval()  # random weights: the cost is the architecture's
    measure(full, (5, 16, 60, 90), max(1, args.repeat // 2) if not args.no_full_run else 1, "full size (480x720 frames)",
            run=not args.no_full_run)
    if not args.no_full_run:
        t0 = time.perf_counter()
        fit_latent_rgb(full)
        print(f"full size: fitting the map (24 pictures of 64x96, encoded and decoded) took {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
