"""The memory plan's GPU table, predicted without a GPU: every memory mode at 1, 2 and 4 sessions.

    .venv/bin/python bench/memory.py [--out FILE] [--sessions 1,2,4] [--no-cache]

Traces a whole turn of the released models through the real model code on the meta device
(inference.memory.plan) and prints GiB allocated / reserved per stage and device, what each needs
with the CUDA context and workspaces, which card sizes each mode fits (and what auto picks), the
offload modes' bytes moved per turn and their seconds over PCIe, and the estimated seconds per turn
on each listed card (inference.memory.cards: estimates until bench/gpu.sh measures a card). The
answer is cached on disk (inference.memory.cache); --no-cache traces again.
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import sys
import tempfile
import time
from pathlib import Path

from inference.memory.cache import cached_predict
from inference.memory.cards import CARDS, UTILISATION, turn_work
from inference.memory.offload import transfer_seconds
from inference.memory.plan import (
    AUTO_MARGIN_GIB,
    OFFLOAD_MODES,
    OVERHEAD_GIB,
    choose,
    fit_table,
    table,
    usable_gib,
)


def transfers(preds) -> str:
    lines = ["| mode | sessions | moved per turn (GB) | PCIe 3.0 x16 (~12 GB/s) | PCIe 4.0 x16 (~25 GB/s) |",
             "| --- | --- | --- | --- | --- |"]
    seen = set()
    for p in preds:
        if p.mode in OFFLOAD_MODES and (p.mode, p.sessions) not in seen:
            seen.add((p.mode, p.sessions))
            s = transfer_seconds(p.moved_bytes)
            lines.append(f"| {p.mode} | {p.sessions} | {p.moved_bytes / 1e9:.2f} | {s['PCIe 3.0 x16']:.2f} s "
                         f"| {s['PCIe 4.0 x16']:.2f} s |")
    return "\n".join(lines)


def estimates(preds, steps: int) -> str:
    lines = ["| card | tensor TFLOP/s (dense fp16/bf16) | host link | auto picks (1 session) | needs | seconds per turn (estimate) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for card in CARDS:
        gib = usable_gib(card.memory_gb)
        pick = choose([gib], 1, preds, single_gpu=True)
        if not pick.fits:
            lines.append(f"| {card.name} | {card.tflops:g} | {card.link} | none | — | — |")
            continue
        p = next(q for q in preds if q.mode == pick.mode and q.sessions == 1 and q.tiles == pick.tiles)
        work = turn_work(p, steps)
        move = f" ({work.moved_bytes / (card.link_gbps * 1e9):.1f} s of it moving weights)" if work.moved_bytes else ""
        lines.append(f"| {card.name} | {card.tflops:g} | {card.link} | {pick.label} | {pick.need_gib:.1f} GiB of {gib:.1f} "
                     f"| ~{work.seconds(card):.0f} s{move} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", default="1,2,4", help="comma-separated session counts")
    ap.add_argument("--steps", type=int, default=50, help="denoise steps for the seconds per turn (the release's 50)")
    ap.add_argument("--out", default=None, help="Markdown file for the tables")
    ap.add_argument("--no-cache", action="store_true", help="trace again instead of reading the cached answer")
    args = ap.parse_args(argv)
    sessions = tuple(int(s) for s in args.sessions.split(","))
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as fresh:
        preds, hit = cached_predict(sessions=sessions, cache_dir=fresh if args.no_cache else None)
    seconds = time.perf_counter() - t
    work = turn_work(next(p for p in preds if p.sessions == 1), args.steps)
    text = (f"# bench/memory.py: predicted GPU memory of a turn (GiB allocated / reserved)\n\n"
            f"{'Read from the cache' if hit else 'Traced'} in {seconds:.1f} s. 'needs' adds {OVERHEAD_GIB} GiB for the "
            f"CUDA context, cuBLAS/cuDNN workspaces and fragmentation. The offload modes hold one stage's weights at a "
            f"time ('weights': the most at once), once per VAE tile size (largest first).\n\n{table(preds)}\n\n"
            f"Which cards each mode fits (GB as sold, {AUTO_MARGIN_GIB} GiB kept spare by auto's pick):\n\n"
            f"{fit_table(preds)}\n\nWeights the offload modes move host -> device per turn:\n\n{transfers(preds)}\n\n"
            f"Seconds per turn at {args.steps} steps, 1 session (estimates: {work.flops['denoise']:.3g} FLOP denoise + "
            f"{work.flops['vae']:.3g} VAE + {work.flops['mllm']:.3g} MLLM prefill at {UTILISATION:.0%} of the dense "
            f"tensor rate, plus the weights moved at the host link's rate, no overlap):\n\n{estimates(preds, args.steps)}\n")
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
