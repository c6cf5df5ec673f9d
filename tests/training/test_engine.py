"""The engine (training/engine.py) on a toy recipe: loss falls, resume gives the uninterrupted
curve, accumulation equals a bigger batch, two CPU processes (gloo) equal one, the config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.training.toy import ToyRecipe
from training.config import ConfigError, RunConfig, default_config_path, load_config
from training.engine import Recipe, TrainingError, checkpoints, read_losses, train

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]


def run(**kwargs) -> RunConfig:
    base = {"max_steps": 12, "lr": 1e-2, "save_every": 100, "seed": 3}
    return RunConfig(**{**base, **kwargs})


def curve(result) -> list[float]:
    return [r["loss"] for r in result.losses]


def test_toy_is_a_recipe():
    assert isinstance(ToyRecipe(), Recipe)


def test_loss_falls_and_outputs_are_written(tmp_path):
    # The whole set (8 samples) each step: the loss falls to under a quarter in 40 steps.
    result = train(ToyRecipe(dropout=0.0), run(max_steps=40, batch_size=8, lr=3e-2), tmp_path, resume=False, progress=False)
    losses = curve(result)
    assert len(losses) == 40 and result.steps == 40
    assert losses[-1] < losses[0] / 4, losses
    assert [r["step"] for r in read_losses(tmp_path)] == list(range(1, 41))
    assert (tmp_path / "export" / "toy.pt").is_file() and result.exported == [tmp_path / "export" / "toy.pt"]
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert "steps: 40" in card and "accelerate" in card and "samples: 8" in card
    assert [s for s, _ in checkpoints(tmp_path)] == [40]


def test_same_seed_same_curve(tmp_path):
    a = train(ToyRecipe(), run(batch_size=2), tmp_path / "a", resume=False, progress=False)
    b = train(ToyRecipe(), run(batch_size=2), tmp_path / "b", resume=False, progress=False)
    assert curve(a) == curve(b)


def test_resume_gives_the_uninterrupted_curve(tmp_path):
    # 8 samples, batch 3: the checkpoint at step 5 falls mid-epoch; dropout needs the RNG restored.
    whole = train(ToyRecipe(), run(batch_size=3, save_every=5), tmp_path / "whole", resume=False, progress=False)
    out = tmp_path / "cut"
    train(ToyRecipe(), run(batch_size=3, save_every=5, max_steps=7), out, resume=False, progress=False)
    # The run "died" after step 7: its checkpoint is step 5 (save_every) and 7 (the last step);
    # drop the last one as a kill before it would have left it.
    import shutil

    shutil.rmtree(checkpoints(out)[-1][1])
    with pytest.raises(TrainingError, match="--resume"):
        train(ToyRecipe(), run(batch_size=3, save_every=5), out, resume=False, progress=False)
    resumed = train(ToyRecipe(), run(batch_size=3, save_every=5), out, resume=True, progress=False)
    assert resumed.resumed_from == 5
    assert curve(resumed) == pytest.approx(curve(whole), abs=1e-6)
    assert [r["step"] for r in read_losses(out)] == list(range(1, 13))
    assert sorted(p.name for p in (out / "samples").iterdir()) == ["step-10.txt", "step-12.txt", "step-5.txt", "step-7.txt"]


def test_accumulation_equals_a_bigger_batch(tmp_path):
    accumulated = train(ToyRecipe(dropout=0.0), run(batch_size=1, grad_accum=2), tmp_path / "a", resume=False, progress=False)
    batched = train(ToyRecipe(dropout=0.0), run(batch_size=2, grad_accum=1), tmp_path / "b", resume=False, progress=False)
    assert curve(accumulated) == pytest.approx(curve(batched), rel=1e-5, abs=1e-6)
    wa = torch.load(tmp_path / "a" / "export" / "toy.pt")
    wb = torch.load(tmp_path / "b" / "export" / "toy.pt")
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5)


def test_validation_loss_is_logged(tmp_path):
    result = train(ToyRecipe(with_val=True), run(validate_every=4), tmp_path, resume=False, progress=False)
    assert [v["step"] for v in result.val_losses] == [4, 8, 12]


def test_two_cpu_processes_equal_one(tmp_path):
    """accelerate launch --num_processes 2 --cpu (gloo), same global batch: the same losses."""
    single = train(ToyRecipe(dropout=0.0), run(batch_size=4, grad_accum=1, max_steps=6, lr=1e-2, seed=0), tmp_path / "one",
                   resume=False, progress=False)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / "training/accelerate/cpu.yaml"),
               "--num_processes", "2", "-m", "tests.training.toy", str(tmp_path / "two"), "4", "1", "6"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    two = [json.loads(line)["loss"] for line in (tmp_path / "two" / "losses.jsonl").read_text().splitlines()]
    assert two == pytest.approx(curve(single), rel=1e-5, abs=1e-6)


def test_config_files_load_and_overrides_apply():
    for phase in "abc":
        config = load_config(default_config_path(phase))
        assert config.run.max_steps > 0
    config = load_config(default_config_path("b"), ["run.lr=1e-4", "run.gradient_checkpointing=false", "phase.lora_rank=8"])
    assert config.run.lr == 1e-4 and config.run.gradient_checkpointing is False and config.phase["lora_rank"] == 8
    assert "lr = 0.0001" in config.to_toml()
    with pytest.raises(ConfigError, match="no setting"):
        load_config(default_config_path("b"), ["run.learning_rate=1"])
    with pytest.raises(ConfigError, match="no setting"):
        load_config(default_config_path("b"), ["phase.nope=1"])
    with pytest.raises(ConfigError, match="optimizer"):
        load_config(default_config_path("b"), ["run.optimizer=sgd"])
    with pytest.raises(ConfigError, match="whole number"):
        load_config(default_config_path("b"), ["run.max_steps=1.5"])


def test_shipped_launch_files_are_accelerate_configs():
    from accelerate.commands.config.config_args import load_config_from_file

    kinds = {p.stem: load_config_from_file(str(p)).distributed_type.value for p in (ROOT / "training/accelerate").glob("*.yaml")}
    assert kinds == {"cpu": "NO", "one_gpu": "NO", "ddp": "MULTI_GPU", "deepspeed_zero2": "DEEPSPEED", "fsdp": "FSDP"}


def test_accelerate_private_names_were_checked_on_this_version():
    import accelerate

    from training.accelerate_adapter import CHECKED_VERSIONS

    assert any(accelerate.__version__.startswith(v) for v in CHECKED_VERSIONS), accelerate.__version__


def test_cpu_offloaded_states_on_a_cpu_run_are_refused(tmp_path):
    with pytest.raises(TrainingError, match="cpu_offload"):
        train(ToyRecipe(), run(optimizer="cpu_offload"), tmp_path, resume=False, progress=False)
