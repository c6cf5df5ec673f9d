"""`bench/gpu.sh --train`: training steps per phase on one GPU against the training memory plan.

Full size (default): phases (a) and (b) at full depth with random weights (the 30-block 2B DiT
and its encoder at 6976 tokens a clip; Mistral-7B with the AnimeGamer vocabulary and resamplers on
a 5-turn game), each with its default config (training/configs/phase_<x>.toml: bf16, gradient
checkpointing, 8-bit optimizer states, phase (b)'s int8 base), built through the phase's own
recipe from folders on disk as `animegamer train` builds it. `--tiny`: the tests' tiny configs on
the CPU in fp32 (seconds), so that this code path is tested.

Per phase: micro-steps per second and optimizer steps per second (after one warm-up step, which
builds the optimizer states and compiles nothing), the peak of `torch.cuda.max_memory_allocated`
over the timed steps (on the CPU: the live tensor bytes, inference.memory.live), and the plan's
prediction for the same config (training.memory.predict: the peak without margin, and what a card
must offer with the margin and the CUDA context). Nothing is asserted.
"""

from __future__ import annotations

import dataclasses
import gc
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

GiB = 2**30


@dataclass
class TrainResult:
    phase: str
    config: str
    micro_per_s: float = float("nan")
    steps_per_s: float = float("nan")
    measured_gib: float = float("nan")
    predicted_gib: float = float("nan")
    need_gib: float = float("nan")
    loss: float = float("nan")
    error: str = ""


def phase_config(phase: str, tiny: bool, steps: int, accum: int) -> tuple[Any, dict[str, Any]]:
    """The phase's default config (tiny: fp32 on the CPU, adamw: torchao's 8-bit states and
    int8 weights are for the GPU run), at `steps` optimizer steps of `accum` micro-steps."""
    from training.config import default_config_path, load_config

    config = load_config(default_config_path(phase))
    run = dataclasses.replace(config.run, max_steps=steps + 1, grad_accum=accum, warmup_steps=0)
    table = dict(config.phase)
    if tiny:
        run = dataclasses.replace(run, mixed_precision="no", optimizer="adamw")
        if "quantize" in table:
            table["quantize"] = "none"
    return run, table


def build_case(phase: str, root: Path, tiny: bool, run: Any, table: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The recipe and its [phase] table, from random full-depth (or tiny) models on disk."""
    import train_memory as tm

    if phase == "a":
        data, decoder = tm.phase_a_folders(root, tiny, None, 17)
        table = {**table, "decoder": str(decoder), "encoder_warmup_steps": 0, "sample_steps": 0}
        from training.decoder_a import make

        return make(data, table, run), table
    files = tm.phase_b_files(root, tiny, None, dtype=torch.float32 if tiny else torch.bfloat16)
    data = tm.phase_b_set(root)
    from testkit.film_set import phase_b_table
    from training.mllm_recipe import make

    table = {**table, **phase_b_table(files, max_turns=5, quantize=table.get("quantize", "none"))}
    return make(data, table, run), table


def run_phase(phase: str, tiny: bool, steps: int, accum: int, root: Path) -> TrainResult:
    from accelerate import Accelerator

    from inference.memory.live import LiveBytes
    from training.accelerate_adapter import reset_accelerator_state
    from training.engine import make_optimizer
    from training.memory import predict, shape_function

    run, table = phase_config(phase, tiny, steps, accum)
    label = (f"{'tiny, fp32' if tiny else run.mixed_precision}, {run.optimizer}, "
             f"checkpointing {'on' if run.gradient_checkpointing else 'off'}, batch {run.batch_size} x {accum}"
             + (f", base {table['quantize']}" if "quantize" in table else ""))
    result = TrainResult(phase, label)
    recipe, table = build_case(phase, root, tiny, run, table)
    reset_accelerator_state()  # one process, several phases with their own settings
    accelerator = Accelerator(cpu=tiny, mixed_precision=run.mixed_precision)
    device = accelerator.device
    model = recipe.build_model(accelerator).to(device).train()
    optimizer = make_optimizer(run, recipe.param_groups(model))
    dataset = recipe.dataset()
    sample = len(dataset) - 1  # phase (b): the longest game prefix; phase (a): any clip
    batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in recipe.collate([dataset[sample]]).items()}
    step_at = 0 if phase == "b" else table.get("encoder_warmup_steps", 0)

    def micro() -> float:
        with accelerator.autocast():
            loss = recipe.loss(model, batch, step_at)["loss"]
        accelerator.backward(loss)
        return float(loss.detach())

    def optimizer_step() -> None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    micro()  # warm-up: builds the optimizer states
    optimizer_step()
    live = None
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    else:
        live = LiveBytes(device.type)
        live.__enter__()
        live.adopt([*model.parameters(), *model.buffers(),
                    *(t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t))])
        live.begin("steps")
    t = time.perf_counter()
    try:
        for _ in range(steps):
            for _ in range(accum):
                result.loss = micro()
            optimizer_step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    finally:
        if live is not None:
            live.end()
            live.__exit__(None, None, None)
    seconds = time.perf_counter() - t
    result.micro_per_s, result.steps_per_s = steps * accum / seconds, steps / seconds
    result.measured_gib = (torch.cuda.max_memory_allocated() if live is None else live.peak("steps").peak) / GiB
    shape = shape_function(phase)(run, table)
    if "input_ids" in batch:  # phase (b): the sample's length, where the plan assumes max_turns x max_turn_tokens
        shape = dataclasses.replace(shape, tokens=int(batch["input_ids"].shape[1]))
    peak = predict(shape, run, device=device.type)
    result.predicted_gib, result.need_gib = peak.total / GiB, peak.need_gib()
    return result


def train_table(results: list[TrainResult]) -> str:
    head = ("| phase | config | micro-steps/s | steps/s | peak GiB measured | peak GiB predicted | predicted / measured "
            "| a card needs (GiB, margin + CUDA context) | last loss |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in results:
        if r.error:
            lines.append(f"| {r.phase} | failed: {r.error} |" + " |" * 7)
            continue
        lines.append(f"| {r.phase} | {r.config} | {r.micro_per_s:.3f} | {r.steps_per_s:.3f} | {r.measured_gib:.2f} "
                     f"| {r.predicted_gib:.2f} | {r.predicted_gib / r.measured_gib:.3f} | {r.need_gib:.1f} | {r.loss:.4f} |")
    return "\n".join(lines)


def main_train(tiny: bool, phases: list[str], steps: int, accum: int, env: str, out: Path) -> int:
    import traceback

    results = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-gpu-train-") as tmp:
        for phase in phases:
            t = time.perf_counter()
            try:
                results.append(run_phase(phase, tiny, steps, accum, Path(tmp) / phase))
            except Exception as e:  # noqa: BLE001  (one failing phase must not lose the other's row)
                traceback.print_exc()
                results.append(TrainResult(phase, "", error=f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"))
            gc.collect()  # the phase's model and optimizer, before the next one is built
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            print(f"\n[phase ({phase})] {time.perf_counter() - t:.1f} s", flush=True)
            print(train_table(results[-1:]), flush=True)
    text = (f"# bench/gpu.sh --train{' --tiny' if tiny else ''}\n\n{env}\n\n"
            f"Random weights at {'tiny' if tiny else 'full'} size; {steps} optimizer steps of {accum} micro-steps per "
            f"phase after one warm-up step; peak memory over the timed steps. Total {time.perf_counter() - t0:.0f} s.\n\n"
            f"{train_table(results)}\n")
    out.write_text(text)
    print("\n" + text + f"\nwritten to {out}")
    return 1 if any(r.error for r in results) else 0
