"""The one training loop every phase uses, driven by accelerate.

A phase is a `Recipe` (the model, its trainable groups, its data and its loss); `train` does the
rest the same way for all of them: seeds, mixed precision, gradient accumulation, clipping, the
optimizer and the warm-up schedule, checkpoints (accelerate's state plus the step, from which the
data position follows), resume to the same loss curve, `losses.jsonl`, the progress bar, held-out
losses, the export and the model card. The same code runs on a CPU, one GPU, DDP, DeepSpeed and
FSDP through `accelerate launch --config_file training/accelerate/<name>.yaml`.

Batches: `run.batch_size` is the global batch of one micro-step (accelerate splits it between the
processes: `split_batches`), so one config gives the same samples per optimizer step on one
process or eight. The data order is a permutation per epoch drawn from `run.seed` and the epoch
alone, so the step count fixes the data position and a resumed run sees the batches an
uninterrupted one would have.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from accelerate import Accelerator
from accelerate.utils import (
    DataLoaderConfiguration,
    DistributedDataParallelKwargs,
    DistributedType,
    GradientAccumulationPlugin,
    set_seed,
)
from torch.utils.data import DataLoader, Dataset, Sampler

from training.accelerate_adapter import reset_accelerator_state
from training.config import RunConfig
from training.report import write_loss_plot, write_model_card

CHECKPOINTS = "checkpoints"
LOSSES = "losses.jsonl"
EXPORT = "export"
_STEP_PREFIX = "step-"
_TRAINER_STATE = "trainer.json"


class TrainingError(RuntimeError):
    """A run that cannot start or continue (the message says why and what to do)."""


@runtime_checkable
class Recipe(Protocol):
    """One training phase. `loss` must run the model through its `forward` (so DDP's gradient
    hooks fire); `export` receives the unwrapped model on every process and writes on the main
    one."""

    name: str  # "a", "b", "c"

    def build_model(self, accelerator: Accelerator) -> torch.nn.Module: ...  # holds every trainable parameter

    def param_groups(self, model: torch.nn.Module) -> list[dict]: ...  # optimizer groups (trainable only)

    def dataset(self) -> Dataset: ...

    def collate(self, items: list) -> Any: ...

    def loss(self, model: torch.nn.Module, batch: Any, step: int) -> dict[str, torch.Tensor]: ...  # "loss" is backpropagated

    def export(self, model: torch.nn.Module, out: Path, accelerator: Accelerator) -> list[Path]: ...  # what the worker plays


@dataclass
class Result:
    out: Path
    steps: int  # optimizer steps done, this run's and those it resumed
    losses: list[dict[str, float]]  # one record per step: "step", "loss", the other parts, "lr"
    exported: list[Path] = field(default_factory=list)
    checkpoint: Path | None = None
    resumed_from: int = 0
    val_losses: list[dict[str, float]] = field(default_factory=list)


class EpochSampler(Sampler[int]):
    """A permutation of the dataset drawn from (seed, epoch) only: the same on every process and
    after a resume, whatever the global random state."""

    def __init__(self, size: int, seed: int, shuffle: bool = True) -> None:
        self.size, self.seed, self.shuffle, self.epoch = size, seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(range(self.size))
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        return iter(torch.randperm(self.size, generator=generator).tolist())

    def __len__(self) -> int:
        return self.size


def make_optimizer(run: RunConfig, groups: list[dict]) -> torch.optim.Optimizer:
    """adamw (torch), adamw8bit (torchao: 8-bit states, 4x smaller) or cpu_offload (torchao: the
    states and the step on the CPU, what the authors had DeepSpeed do)."""
    if not any(p.requires_grad for g in groups for p in g["params"]):
        raise TrainingError("the recipe's parameter groups hold no trainable parameter")
    if run.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=run.lr, weight_decay=run.weight_decay)
    if run.optimizer == "adamw8bit":
        from torchao.optim import AdamW8bit

        return AdamW8bit(groups, lr=run.lr, weight_decay=run.weight_decay)
    from torchao.optim import CPUOffloadOptimizer

    if any(p.device.type == "cpu" for g in groups for p in g["params"]):
        raise TrainingError("run.optimizer = cpu_offload moves a GPU model's optimizer states to the CPU: "
                            "on a CPU run use adamw")

    # torchao keeps each parameter's states on the CPU and steps there (the GPU holds weights and
    # gradients only); it is meant for a model on a GPU.
    return CPUOffloadOptimizer(groups, torch.optim.AdamW, offload_gradients=False,  # type: ignore[return-value]
                               lr=run.lr, weight_decay=run.weight_decay)


def make_scheduler(run: RunConfig, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    from transformers import get_scheduler

    return get_scheduler(run.schedule, optimizer, num_warmup_steps=run.warmup_steps, num_training_steps=run.max_steps)


def checkpoints(out: Path) -> list[tuple[int, Path]]:
    """The run's checkpoints, oldest first, as (step, folder); a folder without the trainer's
    state (a save cut short) is not one."""
    found = []
    for folder in (Path(out) / CHECKPOINTS).glob(f"{_STEP_PREFIX}*"):
        state = folder / _TRAINER_STATE
        if state.is_file():
            found.append((int(json.loads(state.read_text())["step"]), folder))
    return sorted(found)


def read_losses(out: Path) -> list[dict[str, Any]]:
    path = Path(out) / LOSSES
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def train(recipe: Recipe, run: RunConfig, out: Path, *, resume: bool, config_text: str = "", progress: bool = True) -> Result:
    """Trains `recipe` for `run.max_steps` optimizer steps into `out` (checkpoints, losses.jsonl,
    export/, MODEL_CARD.md). With `resume`, continues from the latest checkpoint in `out`."""
    out = Path(out)
    done = checkpoints(out)
    if done and not resume:
        raise TrainingError(f"{out} already holds a run (checkpoint at step {done[-1][0]}): pass --resume to continue it, or choose another --out")
    reset_accelerator_state()
    accelerator = Accelerator(
        mixed_precision=run.mixed_precision,
        gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=run.grad_accum, sync_with_dataloader=False),
        dataloader_config=DataLoaderConfiguration(split_batches=True),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=bool(getattr(recipe, "find_unused_parameters", False)))],
        project_dir=str(out),
    )
    if run.batch_size % accelerator.num_processes:
        raise TrainingError(f"run.batch_size ({run.batch_size}) must be a multiple of the number of processes ({accelerator.num_processes})")
    set_seed(run.seed)
    try:
        return _train(recipe, run, out, accelerator, done[-1] if (done and resume) else None, config_text, progress)
    finally:
        accelerator.end_training()
        reset_accelerator_state()


def _train(recipe: Recipe, run: RunConfig, out: Path, accelerator: Accelerator, start: tuple[int, Path] | None,
           config_text: str, progress: bool) -> Result:
    model = recipe.build_model(accelerator)
    if accelerator.distributed_type not in (DistributedType.DEEPSPEED, DistributedType.FSDP):
        model = model.to(accelerator.device)  # the optimizer (torchao's offload) sees the parameters where they train
    optimizer = make_optimizer(run, recipe.param_groups(model))
    scheduler = make_scheduler(run, optimizer)
    data = recipe.dataset()
    sampler = EpochSampler(len(data), run.seed)  # type: ignore[arg-type]
    loader = DataLoader(data, batch_size=run.batch_size, sampler=sampler, collate_fn=recipe.collate, drop_last=True,
                        generator=torch.Generator().manual_seed(run.seed))
    if len(loader) == 0:
        raise TrainingError(f"the training set holds {len(data)} samples, fewer than one batch of {run.batch_size}")  # type: ignore[arg-type]
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    trainable = [p for p in model.parameters() if p.requires_grad]

    step = 0
    if start is not None:
        step, folder = start
        accelerator.load_state(str(folder))
    history = [r for r in read_losses(out) if r["step"] <= step] if accelerator.is_main_process else []
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        _rewrite_losses(out, history)
        if config_text:
            (out / "config.toml").write_text(config_text, encoding="utf-8")

    batches = _micro_batches(accelerator, loader, sampler, step * run.grad_accum)
    bar = _progress_bar(accelerator, run, step, progress)
    started, first_step = time.monotonic(), step
    while step < run.max_steps:
        parts = []
        for _ in range(run.grad_accum):
            batch = next(batches)
            with accelerator.accumulate(model):
                with accelerator.autocast():
                    losses = recipe.loss(model, batch, step)
                accelerator.backward(losses["loss"])
                if accelerator.sync_gradients and run.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(trainable, run.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            parts.append({k: v.detach().float() for k, v in losses.items()})
        step += 1
        mean = {k: torch.stack([p[k] for p in parts]).mean() for k in parts[0]}
        mean = accelerator.reduce(mean, reduction="mean")
        record = {"step": step, **{k: float(v) for k, v in mean.items()}, "lr": scheduler.get_last_lr()[0]}
        val = _validate(recipe, run, model, accelerator, step)
        if val is not None:
            record["val_loss"] = val
        if accelerator.is_main_process:
            history.append(record)
            with (out / LOSSES).open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        if bar is not None:
            bar.update(1)
            if step % run.log_every == 0 or step == run.max_steps:
                bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}")
        if step % run.save_every == 0 or step == run.max_steps:
            _save(accelerator, out, step, run.keep_checkpoints)
            if accelerator.is_main_process:
                write_loss_plot(out, history)
                _sample(recipe, model, out, step, accelerator)
            accelerator.wait_for_everyone()
    if bar is not None:
        bar.close()

    accelerator.wait_for_everyone()
    exported = recipe.export(accelerator.unwrap_model(model), out / EXPORT, accelerator)
    accelerator.wait_for_everyone()
    done = checkpoints(out)
    if accelerator.is_main_process:
        write_model_card(out, recipe, run, history, exported, config_text, accelerator,
                         seconds=time.monotonic() - started, steps_this_run=step - first_step)
    return Result(out=out, steps=step, losses=[r for r in history if "loss" in r], exported=exported,
                  checkpoint=done[-1][1] if done else None, resumed_from=start[0] if start else 0,
                  val_losses=[{"step": r["step"], "val_loss": r["val_loss"]} for r in history if "val_loss" in r])


def _micro_batches(accelerator: Accelerator, loader: DataLoader, sampler: EpochSampler, start: int) -> Iterator[Any]:
    """Micro-batches forever, from the `start`-th one: epoch and offset follow from the count."""
    epoch, skip = divmod(start, len(loader))
    while True:
        batches = accelerator.skip_first_batches(loader, skip) if skip else loader
        # accelerate's loaders set the sampler's epoch from their own count of iterations (a
        # skipping loader starts at 0): give them the epoch the step count says.
        sampler.set_epoch(epoch)
        if hasattr(batches, "set_epoch"):
            batches.set_epoch(epoch)  # type: ignore[union-attr]
        yield from batches
        epoch, skip = epoch + 1, 0


def _validate(recipe: Recipe, run: RunConfig, model: torch.nn.Module, accelerator: Accelerator, step: int) -> float | None:
    """Mean loss over the recipe's held-out set (if it has one) every `validate_every` steps."""
    held_out = getattr(recipe, "val_dataset", None)
    if not run.validate_every or step % run.validate_every or held_out is None:
        return None
    data = held_out()
    if data is None or len(data) == 0:
        return None
    # Each process scores every sample (held-out sets are small): no gather, the same number anywhere.
    devices = [accelerator.device] if accelerator.device.type == "cuda" else []
    model.eval()
    total = torch.zeros((), device=accelerator.device)
    # The held-out loss draws (timesteps, noise) from its own stream: training's is left as it was.
    with torch.random.fork_rng(devices=devices), torch.no_grad(), accelerator.autocast():
        for i in range(len(data)):
            total += recipe.loss(model, recipe.collate([data[i]]), step)["loss"].float()
    model.train()
    return float(total / len(data))


def _sample(recipe: Recipe, model: torch.nn.Module, out: Path, step: int, accelerator: Accelerator) -> None:
    """The recipe's sample at a checkpoint (a clip decoded from a held-out game, for the decoder
    phases), if it has one; on the main process, drawing from its own random stream."""
    sample = getattr(recipe, "sample", None)
    if sample is None:
        return
    devices = [accelerator.device] if accelerator.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad(), accelerator.autocast():
        sample(accelerator.unwrap_model(model), out, step)


def _save(accelerator: Accelerator, out: Path, step: int, keep: int) -> None:
    folder = out / CHECKPOINTS / f"{_STEP_PREFIX}{step:07d}"
    accelerator.save_state(str(folder))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        # Written last: a folder without it is a save cut short and is not resumed from.
        (folder / _TRAINER_STATE).write_text(json.dumps({"step": step}), encoding="utf-8")
        for _, old in checkpoints(out)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def _rewrite_losses(out: Path, history: list[dict[str, Any]]) -> None:
    """losses.jsonl holds the steps up to the checkpoint resumed from: a killed run's later lines
    are dropped, as the resumed run writes them again."""
    text = "".join(json.dumps(r) + "\n" for r in history)
    (out / LOSSES).write_text(text, encoding="utf-8")


def _progress_bar(accelerator: Accelerator, run: RunConfig, step: int, enabled: bool) -> Any:
    if not (enabled and accelerator.is_main_process):
        return None
    from tqdm.auto import tqdm

    # tqdm shows steps per second and the ETA; the postfix adds the loss and the learning rate.
    return tqdm(total=run.max_steps, initial=step, desc="train", unit="step", dynamic_ncols=True)
