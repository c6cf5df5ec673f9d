"""Benchmark of the AnimeGamer MLLM: one turn split into prefill and state decoding, cached against
uncached state decoding, the released causal state pass against the default, batched against
sequential turns. Prints figures and ratios; asserts nothing about speed.

    python bench/mllm.py                         # tiny random model on CPU (built in a temp dir)
    python bench/mllm.py --gpu --mistral DIR --tokenizer DIR --agent FILE   # the real 7B, bf16
    python bench/mllm.py --gpu --random-7b       # Mistral-7B shapes, random weights (no download)

Options: --windows 0,1,3 (history turns in the prompt), --batch 4, --repeat 7 (best of N is printed).
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from inference.mllm.instruction import InstructionEncoder  # noqa: E402
from inference.mllm.loading import default_device_dtype, load_mllm  # noqa: E402
from inference.mllm.predict import MLLMPredictor, PredictOptions  # noqa: E402
from inference.mllm.prompt import HistoryItem, PromptBuilder  # noqa: E402
from inference.mllm.tokens import SPECIAL, verify  # noqa: E402
from testkit.tiny import mllm as tiny  # noqa: E402

INSTRUCTIONS = [
    "Character: Qiqi; Motion: quickly fly on the broomstick; Background: night sky.",
    "Character: Jiji; Motion: slowly walk; Background: morning street.",
    "Character: Qiqi, Jiji; Motion: happily eat; Background: day house.",
    "Character: Qiqi; Motion: carefully read; Background: evening room.",
]


def history(n: int, seed: int, rep_dim: int) -> list[HistoryItem]:
    rng = np.random.default_rng(seed)
    return [
        HistoryItem(INSTRUCTIONS[i % 4], tuple(int(v) for v in rng.integers(-5, 6, 4)),
                    rng.standard_normal((226, rep_dim)).astype(np.float32))
        for i in range(n)
    ]


def timed(fns: dict, repeat: int) -> dict[str, tuple[float, dict[str, float]]]:
    """Best (minimum) wall time of each fn() over `repeat` rounds, and the best of each stage it
    reports. The fns run interleaved, round after round, and the minimum is kept: on a shared
    machine a burst of other work then hits every variant alike instead of one of them."""
    for fn in fns.values():
        fn()  # warm-up
    totals: dict[str, list[float]] = {k: [] for k in fns}
    stages: dict[str, dict[str, list[float]]] = {k: {} for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            out = fn()
            totals[name].append(time.perf_counter() - t)
            for k, v in out[0].timings.items():
                stages[name].setdefault(k, []).append(v)
    return {n: (min(totals[n]), {k: min(v) for k, v in stages[n].items()}) for n in fns}


def ms(x: float) -> str:
    return f"{x * 1e3:8.1f} ms"


def run(predictor: MLLMPredictor, encoder: InstructionEncoder, windows: list[int], batch: int, repeat: int) -> None:
    rep_dim = predictor.model.rep_dim
    pool = history(max(windows + [1]), seed=0, rep_dim=rep_dim)
    print(f"device {predictor.model.device}, dtype {predictor.model.dtype}, best of {repeat}")
    warm = PromptBuilder(encoder, SPECIAL, max(windows)).build(INSTRUCTIONS[0], pool)
    for _ in range(3):  # first calls pay for allocator and kernel set-up
        predictor.predict(warm)
    for w in windows:
        prompt = PromptBuilder(encoder, SPECIAL, w).build(INSTRUCTIONS[0], pool)
        variants = {
            "cached": PredictOptions(),
            "uncached": PredictOptions(use_cache=False),
            "released_causal cached": PredictOptions(state_pass="released_causal"),
            "released_causal uncached": PredictOptions(state_pass="released_causal", use_cache=False),
        }
        row = timed({n: (lambda o=o, prompt=prompt: predictor.predict_batch([prompt], o)) for n, o in variants.items()}, repeat)
        total, st = row["cached"]
        print(f"\nwindow {w} ({len(prompt)} tokens): one turn {ms(total)} (prefill {ms(st['prefill'])}, states {ms(st['states'])})")
        for name in ("uncached", "released_causal cached", "released_causal uncached"):
            t, s = row[name]
            print(f"  {name:26s} total {ms(t)}  prefill {ms(s['prefill'])}  states {ms(s['states'])}"
                  f"  -> total x{t / total:5.2f} of default")
        print(f"  state decoding uncached/cached: x{row['uncached'][1]['states'] / st['states']:.2f}")

    builders = [PromptBuilder(encoder, SPECIAL, w) for w in windows]
    mixed = [builders[i % len(builders)].build(INSTRUCTIONS[i % 4], pool) for i in range(batch)]
    same = [builders[-1].build(INSTRUCTIONS[i % 4], pool) for i in range(batch)]
    for label, prompts in (("mixed windows", mixed), (f"window {windows[-1]}", same)):
        lengths = [len(p) for p in prompts]
        got = timed({"batched": lambda prompts=prompts: predictor.predict_batch(prompts),
                     "sequential": lambda prompts=prompts: [predictor.predict(p) for p in prompts]}, repeat)
        t_batch, t_seq = got["batched"][0], got["sequential"][0]
        print(f"\nbatch of {batch} turns, {label} (lengths {lengths}): batched {ms(t_batch)}, sequential {ms(t_seq)}"
              f" -> sequential/batched x{t_seq / t_batch:.2f}, per turn {ms(t_batch / batch)}")


def random_7b(device, dtype, **overrides) -> MLLMPredictor:
    """Mistral-7B-Instruct-v0.1 shapes with random weights (LoRA merged away: plain weights)."""
    model = tiny.random_mllm(device, dtype, **{**tiny.MISTRAL_7B_SHAPE, **overrides})
    return MLLMPredictor(model, SPECIAL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="run on cuda in bf16")
    ap.add_argument("--device", help="explicit device (default: cuda with --gpu, else cpu)")
    ap.add_argument("--mistral"), ap.add_argument("--tokenizer"), ap.add_argument("--agent")
    ap.add_argument("--random-7b", action="store_true", help="7B shapes, random weights")
    ap.add_argument("--windows", default="0,1,3")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    device, dtype = default_device_dtype(args.device or ("cuda" if args.gpu else "cpu"))
    windows = [int(w) for w in args.windows.split(",")]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="bench-mllm-") as tmp:
        if args.mistral or args.tokenizer or args.agent:
            if not (args.mistral and args.tokenizer and args.agent):
                ap.error("--mistral, --tokenizer and --agent go together")
            t = time.perf_counter()
            loaded = load_mllm(args.mistral, args.tokenizer, args.agent, device=device, dtype=dtype)
            print(f"loaded in {time.perf_counter() - t:.1f} s: {loaded.report.summary()}")
            predictor, tok = MLLMPredictor(loaded.model, loaded.special), loaded.tokenizer
        elif args.random_7b:
            tok = tiny.build_tokenizer(Path(tmp) / "tok")
            verify(tok)
            t = time.perf_counter()
            predictor = random_7b(device, dtype)
            print(f"random 7B built in {time.perf_counter() - t:.1f} s")
        else:
            torch.set_num_threads(min(2, torch.get_num_threads()))
            paths = tiny.build_all(tmp)
            loaded = load_mllm(paths["mistral"], paths["tokenizer"], paths["agent"], device=device, dtype=dtype)
            print(f"tiny model: hidden 64, 2 layers, 4 heads; {loaded.report.summary()}")
            predictor, tok = MLLMPredictor(loaded.model, loaded.special), loaded.tokenizer
        run(predictor, InstructionEncoder(tok, SPECIAL), windows, args.batch, args.repeat)
        if device.type == "cuda":
            print(f"\npeak GPU memory {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
