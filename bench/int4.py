"""How far 4-bit MLLM weights move a turn's prediction from bf16, at the released size on this CPU.

    .venv/bin/python bench/int4.py --threads 2 [--prompts 2] [--out FILE]   # ~15 GiB RAM; tens of minutes
    .venv/bin/python bench/int4.py --tiny                                      # seconds (tests/bench runs it)

Random weights at Mistral-7B's shapes with the AnimeGamer vocabulary and projections (normal(0,
0.02), nothing downloaded), bf16. Each prompt (history window 2, random earlier representations)
goes through the real MLLMPredictor in bf16; then the decoder layers are quantised in place to
int4 by the offload_int4 mode's code (inference.mllm.quantize: torchao's Int4WeightOnlyQuantizer,
groups of 128) and the same prompts run again. Printed per prompt: the representation's relative
L2 deviation and its cosine similarity, and the four states in bf16 and int4. Random weights make
the states' logits nearly flat, so a state that flips here says less than on the real weights; the
representation's deviation is the figure to read. Nothing is asserted.
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
from fullsize import available

from inference.memory.live import GiB, LiveBytes
from inference.mllm.instruction import InstructionEncoder
from inference.mllm.model import MISTRAL_7B_SHAPE
from inference.mllm.predict import MLLMPredictor
from inference.mllm.prompt import HistoryItem, PromptBuilder
from inference.mllm.quantize import quantize_weights
from inference.mllm.tokens import SPECIAL
from tests.tiny import mllm as tiny_mllm

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
    ap.add_argument("--out", default=None, help="Markdown file for the table")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    shape = {} if args.tiny else dict(MISTRAL_7B_SHAPE)
    rep_dim = 1920
    need = 0.1 if args.tiny else 15.5  # GiB: the bf16 7B, its prefill, the Python process
    if (free := available() / GiB) < need:
        print(f"not run: the bf16 model and its prefill need ~{need} GiB, this machine can give {free:.1f} GiB now")
        return 1
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-int4-") as tmp:
        tokenizer = tiny_mllm.build_tokenizer(Path(tmp) / "tokenizer")
        model = tiny_mllm.random_mllm("cpu", torch.bfloat16, rep_dim=rep_dim, **shape)
    bf16_gib = weight_gib(model)
    print(f"bf16 MLLM built in {time.perf_counter() - t0:.0f} s: {bf16_gib:.2f} GiB of weights", flush=True)
    builder = PromptBuilder(InstructionEncoder(tokenizer, SPECIAL), SPECIAL, 2)
    rng = np.random.default_rng(0)
    prompts = []
    for k in range(min(args.prompts, len(INSTRUCTIONS))):
        history = [HistoryItem(INSTRUCTIONS[(k + j + 1) % 4], tuple(int(v) for v in rng.integers(-5, 6, 4)),
                               rng.standard_normal((226, rep_dim)).astype(np.float32)) for j in range(2)]
        prompts.append(builder.build(INSTRUCTIONS[k], history))
    with torch.inference_mode():
        t = time.perf_counter()
        full = [MLLMPredictor(model, SPECIAL).predict(p) for p in prompts]
        bf16_s = time.perf_counter() - t
        t = time.perf_counter()
        n = quantize_weights(model, "int4")
        gc.collect()
        quant_s = time.perf_counter() - t
        int4_gib = weight_gib(model)
        print(f"{n} linears to int4 in {quant_s:.0f} s: {int4_gib:.2f} GiB of weights", flush=True)
        t = time.perf_counter()
        four = [MLLMPredictor(model, SPECIAL).predict(p) for p in prompts]
        int4_s = time.perf_counter() - t
    lines = ["| prompt | tokens | representation: relative L2 | cosine | states bf16 | states int4 |",
             "| --- | --- | --- | --- | --- | --- |"]
    for k, (a, b) in enumerate(zip(full, four, strict=True)):
        ra, rb = a.representation.astype(np.float64), b.representation.astype(np.float64)
        rel = np.linalg.norm(rb - ra) / np.linalg.norm(ra)
        cos = float((ra * rb).sum() / (np.linalg.norm(ra) * np.linalg.norm(rb)))
        lines.append(f"| {k} | {len(prompts[k])} | {rel:.4f} | {cos:.5f} | {a.values} | {b.values} |")
    text = (f"# bench/int4.py{' --tiny' if args.tiny else ''}\n\nRandom weights at {'tiny' if args.tiny else 'the released'} "
            f"Mistral shapes, bf16 vs int4 decoder layers (groups of 128; embedding, lm_head, projections bf16). "
            f"Weights {bf16_gib:.2f} GiB -> {int4_gib:.2f} GiB. Seconds for the prompts: bf16 {bf16_s:.0f}, "
            f"int4 {int4_s:.0f} (quantising {quant_s:.0f}).\n\n" + "\n".join(lines) + "\n")
    if args.out:
        Path(args.out).write_text(text)
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
