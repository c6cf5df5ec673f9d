"""How far 4-bit MLLM weights move a turn's prediction from bf16, at the released size on this CPU.

    .venv/bin/python bench/int4.py --threads 2 [--prompts 2] [--out FILE]   # ~15 GiB RAM; ~6 min here
    .venv/bin/python bench/int4.py --threads 2 --scheme int8                 # the int8 modes', for scale
    .venv/bin/python bench/int4.py --weights MISTRAL_DIR TOKENIZER_DIR AGENT   # the released weights
    .venv/bin/python bench/int4.py --tiny                                      # seconds (tests/bench runs it)

Random weights at Mistral-7B's shapes with the AnimeGamer vocabulary and projections (normal(0,
0.02), nothing downloaded), bf16. Each prompt (history window 2, random earlier representations)
goes through the real MLLMPredictor in bf16; then the decoder layers are quantised in place to
int4 by the offload_int4 mode's code (inference.mllm.quantize: torchao's Int4WeightOnlyQuantizer,
groups of 128) and the same prompts run again. Printed per prompt: the representation's relative
L2 deviation and its cosine similarity, and the four states in bf16 and int4. Random weights make
the states' logits nearly flat, so a state that flips here says less than on the real weights; the
representation's deviation is the figure to read. Nothing is asserted.

`--scheme int8` runs the same comparison with the int8 weights of the low_vram and offload modes,
for scale: random weights at full depth amplify any perturbation, so the two schemes' figures
side by side say how much is the scheme's. The "one linear" figure isolates the scheme's own
error: the first decoder layer's MLP gate projection on random inputs, before and after.

`--weights` loads the released weights instead (the Mistral-7B directory, the tokenizer and the
AnimeGamer agent checkpoint, through the worker's own loader, LoRA merged, bf16): the figure that
says what the 4-bit mode costs a real game, for whoever has the weights (~15 GiB RAM or a GPU host).
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from host_memory import available

from inference.memory.live import GiB, LiveBytes
from inference.mllm.instruction import InstructionEncoder
from inference.mllm.loading import load_mllm
from inference.mllm.model import MISTRAL_7B_SHAPE
from inference.mllm.predict import MLLMPredictor
from inference.mllm.prompt import HistoryItem, PromptBuilder
from inference.mllm.quantize import quantize_weights
from inference.mllm.tokens import SPECIAL
from testkit.tiny import mllm as tiny_mllm

INSTRUCTIONS = (
    "Character: Qiqi; Motion: quickly fly on the broomstick; Background: night sky.",
    "Character: Jiji; Motion: slowly walk; Background: morning street.",
    "Character: Qiqi; Motion: happily run; Background: afternoon bakery.",
    "Character: Tombo; Motion: slowly ride the bicycle; Background: evening seaside.",
)


def weight_gib(model: torch.nn.Module) -> float:
    return LiveBytes("cpu").adopt([*model.parameters(), *model.buffers()]) / GiB


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="the tests' tiny Mistral (seconds)")
    ap.add_argument("--prompts", type=int, default=2, help="prompts to compare (at most 4)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--scheme", choices=("int4", "int8"), default="int4",
                    help="the quantised weights compared with bf16 (int8: the low_vram and offload modes')")
    ap.add_argument("--weights", nargs=3, metavar=("MISTRAL_DIR", "TOKENIZER_DIR", "AGENT_CHECKPOINT"),
                    help="the released weights, loaded as the worker loads them, instead of random ones")
    ap.add_argument("--out", default=None, help="Markdown file for the table")
    args = ap.parse_args(argv)
    scheme = args.scheme
    if args.threads:
        torch.set_num_threads(args.threads)
    shape = {} if args.tiny else dict(MISTRAL_7B_SHAPE)
    rep_dim = 1920
    need = 0.1 if args.tiny else 15.5  # GiB: the bf16 7B, its prefill, the Python process
    if args.weights:  # the weights' files in bf16, and as much again for the prefill and the process
        need = 2 * sum(f.stat().st_size for f in Path(args.weights[0]).rglob("*") if f.is_file()) / GiB + 0.5
    if (free := available() / GiB) < need:
        print(f"not run: the bf16 model and its prefill need ~{need} GiB, this machine can give {free:.1f} GiB now")
        return 1
    t0 = time.perf_counter()
    if args.weights:
        loaded = load_mllm(*args.weights, device="cpu", dtype=torch.bfloat16)
        model, tokenizer, special, rep_dim = loaded.model, loaded.tokenizer, loaded.special, loaded.model.rep_dim
        source = f"The released weights ({Path(args.weights[2]).name}, LoRA merged)"
    else:
        with tempfile.TemporaryDirectory(prefix="bench-int4-") as tmp:
            tokenizer = tiny_mllm.build_tokenizer(Path(tmp) / "tokenizer")
            model = tiny_mllm.random_mllm("cpu", torch.bfloat16, rep_dim=rep_dim, **shape)
        special = SPECIAL
        source = f"Random weights at {'tiny' if args.tiny else 'the released'} Mistral shapes"
    bf16_gib = weight_gib(model)
    print(f"bf16 MLLM built in {time.perf_counter() - t0:.0f} s: {bf16_gib:.2f} GiB of weights", flush=True)
    builder = PromptBuilder(InstructionEncoder(tokenizer, special), special, 2)
    rng = np.random.default_rng(0)
    prompts = []
    for k in range(min(args.prompts, len(INSTRUCTIONS))):
        history = [HistoryItem(INSTRUCTIONS[(k + j + 1) % 4], tuple(int(v) for v in rng.integers(-5, 6, 4)),
                               rng.standard_normal((226, rep_dim)).astype(np.float32)) for j in range(2)]
        prompts.append(builder.build(INSTRUCTIONS[k], history))
    with torch.inference_mode():
        t = time.perf_counter()
        full = [MLLMPredictor(model, special).predict(p) for p in prompts]
        bf16_s = time.perf_counter() - t
        probe = model.causal_lm.model.layers[0].mlp.gate_proj
        x = torch.randn(64, probe.in_features, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
        linear_before = probe(x).double()
        t = time.perf_counter()
        n = quantize_weights(model, scheme)
        gc.collect()
        quant_s = time.perf_counter() - t
        quant_gib = weight_gib(model)
        print(f"{n} linears to {scheme} in {quant_s:.0f} s: {quant_gib:.2f} GiB of weights", flush=True)
        probe = model.causal_lm.model.layers[0].mlp.gate_proj  # (replaced in place by the quantiser)
        linear_rel = float((probe(x).double() - linear_before).norm() / linear_before.norm())
        t = time.perf_counter()
        quantised = [MLLMPredictor(model, special).predict(p) for p in prompts]
        quant_run_s = time.perf_counter() - t
    lines = [f"| prompt | tokens | representation: relative L2 | cosine | states bf16 | states {scheme} |",
             "| --- | --- | --- | --- | --- | --- |"]
    for k, (a, b) in enumerate(zip(full, quantised, strict=True)):
        ra, rb = a.representation.astype(np.float64), b.representation.astype(np.float64)
        rel = np.linalg.norm(rb - ra) / np.linalg.norm(ra)
        cos = float((ra * rb).sum() / (np.linalg.norm(ra) * np.linalg.norm(rb)))
        lines.append(f"| {k} | {len(prompts[k])} | {rel:.4f} | {cos:.5f} | {a.values} | {b.values} |")
    kept = ("decoder layers (groups of 128; embedding, lm_head, projections bf16)" if scheme == "int4"
            else "decoder layers and lm_head (per output channel; embedding, projections bf16)")
    text = (f"# bench/int4.py{' --tiny' if args.tiny else ''}{' --weights' if args.weights else ''} --scheme {scheme}\n\n"
            f"{source}, bf16 vs {scheme} {kept}. "
            f"Weights {bf16_gib:.2f} GiB -> {quant_gib:.2f} GiB. Seconds for the prompts: bf16 {bf16_s:.0f}, "
            f"{scheme} {quant_run_s:.0f} (quantising {quant_s:.0f}). One linear (layer 0's MLP gate projection, 64 random "
            f"inputs): relative L2 deviation {linear_rel:.4f}.\n\n" + "\n".join(lines) + "\n")
    if args.out:
        Path(args.out).write_text(text)
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
