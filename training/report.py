"""What a run leaves for people: the loss-curve PNG and the model card."""

from __future__ import annotations

import importlib.metadata
import platform
from pathlib import Path
from typing import Any

LIBRARIES = ("torch", "transformers", "accelerate", "peft", "diffusers", "torchao", "safetensors", "deepspeed")


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def write_loss_plot(out: Path, history: list[dict[str, Any]]) -> Path | None:
    """out/losses.png (training and held-out loss per step), when matplotlib is installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    train = [(r["step"], r["loss"]) for r in history if "loss" in r]
    val = [(r["step"], r["val_loss"]) for r in history if "val_loss" in r]
    if not train:
        return None
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(*zip(*train, strict=True), label="training loss")
    if val:
        axes.plot(*zip(*val, strict=True), "o-", label="held-out loss")
    axes.set_xlabel("step")
    axes.set_ylabel("loss")
    axes.set_yscale("log")
    axes.legend()
    path = Path(out) / "losses.png"
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def write_model_card(out: Path, recipe: Any, run: Any, history: list[dict[str, Any]], exported: list[Path],
                     config_text: str, accelerator: Any, *, seconds: float, steps_this_run: int) -> Path:
    """out/MODEL_CARD.md: data, steps, losses, config, setup and library versions."""
    losses = [r["loss"] for r in history if "loss" in r]
    vals = [(r["step"], r["val_loss"]) for r in history if "val_loss" in r]
    describe = getattr(recipe, "describe", None)
    data: dict[str, Any] = dict(describe()) if callable(describe) else {}  # type: ignore[arg-type]
    lines = [f"# Model card: AnimeGamer phase ({recipe.name})", ""]
    lines += ["## Data", ""] + [f"- {k}: {v}" for k, v in data.items()] + [""]
    lines += ["## Training", "",
              f"- steps: {len(losses)} (this run: {steps_this_run}, {seconds:.0f} s)",
              f"- processes: {accelerator.num_processes} ({accelerator.distributed_type}), device {accelerator.device}",
              f"- mixed precision: {run.mixed_precision}, optimizer {run.optimizer}, global batch "
              f"{run.batch_size} x {run.grad_accum} accumulation",
              f"- loss, mean of the first 10 steps: {_mean(losses[:10]):.6g}",
              f"- loss, mean of the last 10 steps: {_mean(losses[-10:]):.6g}"]
    if vals:
        lines.append(f"- held-out loss: {vals[0][1]:.6g} at step {vals[0][0]}, {vals[-1][1]:.6g} at step {vals[-1][0]}")
    lines += ["- every step's losses: losses.jsonl" + (", plotted in losses.png" if (Path(out) / "losses.png").exists() else ""), ""]
    lines += ["## Output", ""] + [f"- {Path(p).relative_to(out) if Path(p).is_relative_to(out) else p}" for p in exported] + [""]
    lines += ["## Config", "", "```toml", config_text.strip() or "# (not given)", "```", ""]
    lines += ["## Libraries", ""] + [f"- {k} {v}" for k, v in library_versions().items()] + [""]
    path = Path(out) / "MODEL_CARD.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
