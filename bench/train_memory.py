"""One training step of phases (a) and (b), measured on this CPU against the training memory plan.

    .venv/bin/python bench/train_memory.py --tiny          # tiny models, seconds (tests/bench runs it)
    .venv/bin/python bench/train_memory.py                 # full width, 1 and 2 layers (~10 min, ~8 GB)
    .venv/bin/python bench/train_memory.py --layers 1 --phases b --out bench-train-memory.md

Each case builds the phase through its own recipe (`build_model`, `param_groups`, `collate`,
`loss`) and the engine's optimizer (`make_optimizer`) from files on disk: a training set in the
film pipeline's format (testkit/film_set.py, its features widened to the case's sizes),
and for phase (a) a converted decoder folder holding a random DiT, for phase (b) a random Mistral
folder, the tiny AnimeGamer tokenizer (Mistral's real 32,000 + 284 vocabulary) and a random
phase-(a) encoder. The plan (`training.memory.predict`) reads the same folders through the phase's
own `phase_shape`, so predicted and measured are the same configuration.

Full size means full WIDTH at reduced DEPTH: Mistral-7B's hidden 4096, 32 heads of which 8 for
keys and values, FFN 14336, the grown 32,284 vocabulary, the resamplers at the DiT width 1920 and
the real prompts of 1 to 5 turns; CogVideoX-2B's width 1920, 30 heads, FFN 7680 and the real 226
conditioning + 6750 video tokens. A 7B in fp32 (this CPU has no fast bf16: AVX2 only) needs 29 GB
of weights alone and 30 DiT blocks ~4 minutes each per step, so the cases have 1 and 2 layers:
every per-layer term of the plan (weights, trainable parameters, activations) is multiplied by the
layer count, and the two depths show the measured step growing by one layer's prediction.

The step measured is a micro-step of gradient accumulation after the first (the configs
accumulate 8): the optimizer states exist and the gradients are held through the forward and
backward. Live tensor bytes are counted at the dispatcher (inference.memory.live, as the inference
plan's full-size check), from the weights, gradients, states and the batch adopted at the start
to the peak of the forward and backward, then the optimizer step. Phase (b) runs three samples
(1, 3 and 5 turns) so the activation term is seen to scale with the sequence.
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import dataclasses
import gc
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from inference.memory.live import GiB, LiveBytes

MiB = 2**20


@dataclass
class Case:
    phase: str  # "a", "b"
    label: str  # what the row shows (layers, sequence, checkpointing)
    make: Callable[[], Any]  # the recipe
    run: Any  # RunConfig
    table: dict[str, Any]  # [phase]
    index: int  # the dataset sample measured
    step: int = 0  # the training step (phase (a): the joint stage)


@dataclass
class Measured:
    tokens: int
    weights: int  # frozen parameters
    trainable: int  # trainable parameters (fp32 masters)
    grads: int
    states: int
    batch: int  # the collated sample's tensors
    start: int  # live bytes before the forward (all of the above and the buffers)
    backward: int  # peak of the forward and backward
    step: int  # peak of the optimizer step
    seconds: float

    @property
    def peak(self) -> int:
        return max(self.backward, self.step)

    @property
    def activations(self) -> int:
        return self.backward - self.start


def tensors_of(batch: Any) -> list[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        return [t for v in batch.values() for t in tensors_of(v)]
    return []


def measure(case: Case) -> Measured:
    """One accumulation micro-step and the optimizer step, counted from the first forward op."""
    from accelerate import Accelerator

    from training.engine import make_optimizer

    recipe = case.make()
    model = recipe.build_model(Accelerator(cpu=True)).train()
    optimizer = make_optimizer(case.run, recipe.param_groups(model))
    trainable = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    # The states, built by a step on zero gradients (no forward needed); then the gradients a
    # previous micro-step would have left (zeros: the bytes are what count).
    for p in trainable:
        p.grad = torch.zeros_like(p)
    optimizer.step()
    states = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    batch = recipe.collate([recipe.dataset()[case.index]])
    tokens = int(batch["input_ids"].shape[1]) if "input_ids" in batch else 0
    live = LiveBytes("cpu")
    frozen = [p for p in model.parameters() if not p.requires_grad]
    t = time.perf_counter()
    with live:
        weights = live.adopt(frozen)
        masters = live.adopt(trainable)
        grads = live.adopt([p.grad for p in trainable if p.grad is not None])
        state_bytes = live.adopt(states)
        live.adopt(model.buffers())
        batch_bytes = live.adopt(tensors_of(batch))
        start = live.live
        with live.stage("backward"):
            recipe.loss(model, batch, case.step)["loss"].backward()
        # torchao's 8-bit step is torch.compile'd, which cannot trace under a dispatch mode: not
        # counted (the row compares the backward's peak alone)
        counted = case.run.optimizer != "adamw8bit"
        with live.stage("step"):
            if counted:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - t
    out = Measured(tokens, weights, masters, grads, state_bytes, batch_bytes, start, live.peak("backward").peak,
                   live.peak("step").peak if counted else 0, seconds)
    del model, optimizer, recipe, batch, trainable, states, frozen
    gc.collect()
    return out


def predict_case(case: Case, measured: Measured):
    from training.memory import predict, shape_function

    shape = shape_function(case.phase)(case.run, case.table)
    if measured.tokens:  # phase (b): the plan's sequence is max_turns x max_turn_tokens; here the sample's
        shape = dataclasses.replace(shape, tokens=measured.tokens)
    return shape, predict(shape, case.run, device="cpu")


# -- the files each case reads ------------------------------------------------------------------


def widen_features(folder: Path, latents: tuple[int, ...], text: tuple[int, int], image: tuple[int, int]) -> None:
    """The training set's features shard rewritten at the case's sizes (random, bf16 as stored)."""
    from film.features import FORMAT, shard_name, write_shard
    from film.manifest import read_features_index

    ids = sorted(read_features_index(folder))
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for cid in ids:
        tensors[f"{cid}/latents"] = torch.randn(latents, generator=g).to(torch.bfloat16)
        tensors[f"{cid}/text"] = torch.randn(text, generator=g).to(torch.bfloat16)
        tensors[f"{cid}/image"] = torch.randn(image, generator=g).to(torch.bfloat16)
    write_shard(folder / shard_name(0), tensors, {"format": FORMAT, "clips": ids, "texts": {}, "models": {}})


def phase_a_folders(root: Path, tiny: bool, layers: int | None, frames: int) -> tuple[Path, Path]:
    """A training set with features at the DiT's sizes and a converted decoder folder holding a
    random DiT of `layers` blocks (None: the config's own depth)."""
    from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG, AnimeGamerTransformer3DModel
    from testkit.film_set import training_set
    from testkit.tiny.decoder import TINY_TRANSFORMER_CONFIG
    from training.encoder import CLIP_WIDTH, T5_WIDTH

    base = dict(TINY_TRANSFORMER_CONFIG if tiny else ANIMEGAMER_2B_CONFIG)
    config = {**base, "sample_frames": frames, "num_layers": layers or base["num_layers"]}
    text_dim, image_dim = T5_WIDTH, CLIP_WIDTH  # what the plan counts the encoder at, tiny or not
    data = root / f"film-a-{frames}"
    if not data.exists():
        training_set(data, clips=3)
        latent_frames = (frames - 1) // config["temporal_compression_ratio"] + 1
        widen_features(data, (latent_frames, config["in_channels"], config["sample_height"], config["sample_width"]),
                       (30, text_dim), (196, image_dim))
    decoder = root / f"dit-{config['num_layers']}-{frames}"
    if not decoder.exists():
        torch.manual_seed(0)
        AnimeGamerTransformer3DModel(**config).save_pretrained(str(decoder / "transformer"))
    return data, decoder


def phase_a_cases(root: Path, tiny: bool, layers: list[int], frames: list[int]) -> list[Case]:
    from training.config import RunConfig
    from training.decoder_a import make
    from training.decoder_recipe import dit_config_of, video_tokens

    cases = []
    for n_frames in frames:
        for n_layers in layers:
            data, decoder = phase_a_folders(root, tiny, n_layers, n_frames)
            table = {"decoder": str(decoder), "encoder_warmup_steps": 0, "sample_steps": 0}
            tokens = video_tokens(dit_config_of(decoder)) + 226
            for checkpointing in (False, True):
                run = RunConfig(batch_size=1, grad_accum=8, optimizer="adamw", gradient_checkpointing=checkpointing)
                label = f"{n_layers} block{'s' if n_layers > 1 else ''}, {tokens} tokens, " + (
                    "checkpointing" if checkpointing else "no checkpointing")
                cases.append(Case("a", label, lambda d=data, t=table, r=run: make(d, t, r), run, table, 0))
            # the default config's savings (its bf16 aside: this CPU runs fp32)
            run = RunConfig(batch_size=1, grad_accum=8, optimizer="adamw8bit", gradient_checkpointing=True)
            label = f"{n_layers} block{'s' if n_layers > 1 else ''}, {tokens} tokens, checkpointing, adamw8bit"
            cases.append(Case("a", label, lambda d=data, t=table, r=run: make(d, t, r), run, table, 0))
    return cases


def phase_b_files(root: Path, tiny: bool, layers: int | None, dtype: torch.dtype = torch.float32) -> dict[str, Path]:
    """A random Mistral folder of `layers` decoder layers (None: the full 32) at full width (or
    tiny), the tiny AnimeGamer tokenizer and a random phase-(a) encoder at the DiT's width."""
    from transformers import MistralForCausalLM

    from inference.mllm.model import MISTRAL_7B_SHAPE
    from inference.mllm.tokens import BASE_VOCAB
    from testkit.film_set import IMAGE_DIM, TEXT_DIM
    from testkit.tiny import mllm as tiny_mllm
    from training.encoder import RepresentationEncoder

    shape = {} if tiny else dict(MISTRAL_7B_SHAPE)
    n_layers = layers or shape.get("num_hidden_layers", 2)
    files = {"mistral": root / f"mistral-{n_layers}", "tokenizer": root / "tokenizer",
             "encoder": root / "encoder.safetensors"}
    if not files["tokenizer"].exists():
        tiny_mllm.build_tokenizer(files["tokenizer"])
    if not files["encoder"].exists():
        torch.manual_seed(5)
        RepresentationEncoder(text_dim=TEXT_DIM, image_dim=IMAGE_DIM, width=32 if tiny else 1920).save(files["encoder"])
    if not files["mistral"].exists():
        torch.manual_seed(0)
        config = tiny_mllm.tiny_config(**{**shape, "vocab_size": BASE_VOCAB, "num_hidden_layers": n_layers})
        default = torch.get_default_dtype()
        torch.set_default_dtype(dtype)  # a 7B built in bf16 (the GPU run): 14.5 GB, not fp32's 29
        try:
            MistralForCausalLM(config).save_pretrained(str(files["mistral"]))
        finally:
            torch.set_default_dtype(default)
    return files


def phase_b_set(root: Path) -> Path:
    """The film pipeline's training set with one 5-turn game: its prefixes are the 1- to 5-turn
    samples (dataset index k-1)."""
    from testkit.film_set import training_set

    data = root / "film-b"
    if not data.exists():
        training_set(data, clips=6)
        games = [json.loads(line) for line in (data / "games.jsonl").read_text().splitlines()]
        whole = {**games[0], "split": "train", "turns": [t for g in games for t in g["turns"]][:5]}
        (data / "games.jsonl").write_text(json.dumps(whole) + "\n", encoding="utf-8")
    return data


def phase_b_cases(root: Path, tiny: bool, layers: list[int], turns: list[int]) -> list[Case]:
    from testkit.film_set import phase_b_table
    from training.config import RunConfig
    from training.mllm_recipe import make

    data = phase_b_set(root)
    cases = []
    for n_layers in layers:
        files = phase_b_files(root, tiny, n_layers)
        table = phase_b_table(files, max_turns=5)
        for checkpointing in (False, True):
            run = RunConfig(batch_size=1, grad_accum=8, optimizer="adamw", gradient_checkpointing=checkpointing)
            for k in turns:
                label = f"{n_layers} layer{'s' if n_layers > 1 else ''}, {k} turn{'s' if k > 1 else ''}, " + (
                    "checkpointing" if checkpointing else "no checkpointing")
                cases.append(Case("b", label, lambda t=table, r=run: make(data, t, r), run, table, k - 1))
        # the default config's savings (its bf16 aside: this CPU runs fp32), on the longest sample
        run = RunConfig(batch_size=1, grad_accum=8, optimizer="adamw8bit", gradient_checkpointing=True)
        quantized = {**table, "quantize": "int8"}
        k = max(turns)
        label = f"{n_layers} layer{'s' if n_layers > 1 else ''}, {k} turns, checkpointing, adamw8bit, int8 base"
        cases.append(Case("b", label, lambda t=quantized, r=run: make(data, t, r), run, quantized, k - 1))
    return cases


# -- output -------------------------------------------------------------------------------------


def header(unit: str) -> str:
    return (f"| phase | config | tokens | weights + trainable + grads + states {unit} | activations {unit} measured / "
            f"predicted | peak {unit} measured | peak {unit} predicted | predicted / measured | step s |")


def row(case: Case, m: Measured, shape, peak, scale: int) -> str:
    def f(n: int) -> str:
        return f"{n / scale:.3f}"

    held = m.weights + m.trainable + m.grads + m.states
    tokens = m.tokens or shape.tokens
    predicted = peak_of(m, peak)
    label = case.label + (" (backward's peak: the 8-bit step is not counted)" if not m.step else "")
    return (f"| {case.phase} | {label} | {tokens} | {f(held)} | {f(m.activations)} / {f(peak.activations)} "
            f"| {f(m.peak)} | {f(predicted)} | {predicted / m.peak:.3f} | {m.seconds:.1f} |")


def peak_of(m: Measured, peak) -> int:
    """The predicted peak to hold against the measured one: the backward's alone when the
    optimizer step was not counted."""
    return peak.total if m.step else peak.backward_peak


def environment() -> str:
    import transformers

    return (f"CPU ({platform.machine()}, {torch.get_num_threads()} threads), python {platform.python_version()}, "
            f"torch {torch.__version__}, transformers {transformers.__version__}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="the tests' tiny configs (seconds)")
    ap.add_argument("--phases", default="a,b")
    ap.add_argument("--layers", default="1,2", help="decoder layers / DiT blocks of each case")
    ap.add_argument("--turns", default="1,3,5", help="phase (b): the samples' turns (sequence lengths)")
    ap.add_argument("--frames", default="17", help="phase (a): clip frames (17: the released 5 latent frames)")
    ap.add_argument("--only-savings", action="store_true",
                    help="only the default configs' savings (checkpointing, adamw8bit, phase (b)'s int8 base)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="Markdown file for the table")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    layers = [int(x) for x in args.layers.split(",")]
    phases = args.phases.split(",")
    unit, scale = ("MiB", MiB) if args.tiny else ("GiB", GiB)
    head = header(unit)
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    worst = 0.0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="train-memory-") as tmp:
        root = Path(tmp)
        cases: list[Case] = []
        if "a" in phases:
            cases += phase_a_cases(root, args.tiny, layers, [int(x) for x in args.frames.split(",")])
        if "b" in phases:
            cases += phase_b_cases(root, args.tiny, layers, [int(x) for x in args.turns.split(",")])
        if args.only_savings:
            cases = [c for c in cases if c.run.optimizer == "adamw8bit"]
        print(environment(), flush=True)
        print("\n".join(lines), flush=True)
        for case in cases:
            m = measure(case)
            shape, peak = predict_case(case, m)
            worst = max(worst, abs(peak_of(m, peak) / m.peak - 1))
            lines.append(row(case, m, shape, peak, scale))
            print(lines[-1], flush=True)
    text = (f"# bench/train_memory.py{' --tiny' if args.tiny else ''}\n\n{environment()}\n\n"
            f"fp32 on the CPU, adamw, batch 1, a later micro-step of gradient accumulation; {time.perf_counter() - t0:.0f} s.\n\n"
            + "\n".join(lines) + f"\n\nlargest deviation of the predicted peak: {100 * worst:.1f} %\n")
    print(f"\nlargest deviation of the predicted peak: {100 * worst:.1f} %")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
