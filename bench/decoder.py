"""Decoder benchmark: time per denoising step and per clip (turn).

    # CPU, tiny random-weight config (same code path as the real model):
    python bench/decoder.py tiny --steps 10 --turns 3 --batch 1

    # GPU, a converted checkpoint at 480x720 (17 frames):
    python bench/decoder.py gpu --model-dir /models/decoder-qiqi --dtype fp16 \
        --attention-backend native --compile --steps 50 --turns 3

    # GPU without weights: the real 2B architecture with random weights (speed only).
    python bench/decoder.py gpu --random-weights --dtype fp16

Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import statistics
import time

import numpy as np  # noqa: E402
import torch  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _random_2b_decoder(device: str, dtype: torch.dtype, steps: int, sampler: str):
    from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
    from inference.decoder.pipeline import AnimeGamerDecoder
    from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG, AnimeGamerTransformer3DModel
    from inference.decoder.vae import COGVIDEOX_VAE_CONFIG

    with torch.device(device):
        transformer = AnimeGamerTransformer3DModel(**ANIMEGAMER_2B_CONFIG).to(dtype)
        vae = AutoencoderKLCogVideoX(**COGVIDEOX_VAE_CONFIG).to(dtype)
        transformer.uncond_embedding.normal_()
    return AnimeGamerDecoder(transformer, vae, steps=steps, sampler=sampler)


def run(decoder, turns: int, batch: int, label: str) -> None:
    device = decoder.device
    width = decoder.context_shape[1]
    rng = np.random.default_rng(0)
    print(
        f"{label}: latent {decoder.latent_shape}, {decoder.steps} steps, sampler {decoder.sampler}, "
        f"batch {batch}, dtype {decoder.transformer.dtype}, device {device}"
    )
    for turn in range(turns):
        reps = [rng.standard_normal((226, width)).astype(np.float32) for _ in range(batch)]
        stamps: list[float] = []

        def progress(fraction: float, stage: str, stamps: list[float] = stamps) -> None:
            if stage.startswith("denoise"):
                _sync(device)
                stamps.append(time.perf_counter())

        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        _sync(device)
        t0 = time.perf_counter()
        frames = decoder.decode_batch(reps, [10.0] * batch, list(range(turn * batch, (turn + 1) * batch)), progress)
        _sync(device)
        total = time.perf_counter() - t0
        steps = np.diff([t0, *stamps])
        denoise = stamps[-1] - t0
        line = (
            f"  turn {turn}: {total:.3f} s per turn ({total / batch:.3f} s per clip) | denoise {denoise:.3f} s, "
            f"step mean {statistics.mean(steps) * 1e3:.1f} ms (first {steps[0] * 1e3:.1f}, "
            f"median {statistics.median(steps) * 1e3:.1f}) | vae {total - denoise:.3f} s | frames {frames.shape}"
        )
        if device.type == "cuda":
            line += f" | peak {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB"
        print(line, flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["tiny", "gpu"])
    parser.add_argument("--steps", type=int, default=None, help="denoising steps (tiny: 10, gpu: 50)")
    parser.add_argument("--turns", type=int, default=3, help="clips timed (the first includes warm-up/compile)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--sampler", choices=["released", "stock"], default="released")
    parser.add_argument("--model-dir", help="gpu: directory written by `animegamer convert-decoder`")
    parser.add_argument("--random-weights", action="store_true", help="gpu: real 2B architecture, random weights")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=["fp16", "bf16", "fp32"], default="fp16")
    parser.add_argument("--attention-backend", default=None, help="diffusers backend: native, flash, _native_cudnn, ...")
    parser.add_argument("--compile", action="store_true", help="the `fast` speed preset (regional compile, fused qkv)")
    parser.add_argument("--threads", type=int, default=1, help="tiny: CPU threads")
    args = parser.parse_args(argv)

    if args.mode == "tiny":
        from testkit.tiny.decoder import random_tiny_decoder

        torch.set_num_threads(args.threads)
        decoder = random_tiny_decoder(steps=args.steps or 10, sampler=args.sampler)
        run(decoder, args.turns, args.batch, "tiny config on CPU")
        return

    from inference.decoder.pipeline import DTYPES, load_decoder

    steps = args.steps or 50
    t0 = time.perf_counter()
    if args.random_weights:
        decoder = _random_2b_decoder(args.device, DTYPES[args.dtype], steps, args.sampler)
        if args.attention_backend:
            decoder.transformer.set_attention_backend(args.attention_backend)
        if args.compile:
            from inference.decoder.speed import apply_speed

            print(apply_speed(decoder.transformer, "fast").summary())
    elif args.model_dir:
        decoder = load_decoder(
            args.model_dir, args.device, args.dtype, steps=steps, sampler=args.sampler,
            attention_backend=args.attention_backend, speed="fast" if args.compile else "exact",
        )
    else:
        parser.error("gpu mode needs --model-dir or --random-weights")
    print(f"loaded in {time.perf_counter() - t0:.1f} s; attention backend {args.attention_backend or 'default (SDPA)'}, "
          f"compile {args.compile}")
    run(decoder, args.turns, args.batch, f"AnimeGamer decoder {decoder.latent_shape[2] * 8}x{decoder.latent_shape[3] * 8}")


if __name__ == "__main__":
    main()
