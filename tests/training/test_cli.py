"""`animegamer train`: a tiny phase (b) run end to end through the command line, resume, the
memory refusal, `plan`, and clear errors (no traceback) for bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from animegamer.cli import main
from testkit.film_set import models, training_set

torch.set_num_threads(2)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli")
    out = models(root / "models")
    out["data"] = training_set(root / "tinyfilm", clips=3)
    return out


def phase_b_args(files, out: Path, *extra: str) -> list[str]:
    sets = [f"phase.base_model={json.dumps(str(files['mistral']))}", f"phase.tokenizer={json.dumps(str(files['tokenizer']))}",
            f"phase.encoder={json.dumps(str(files['encoder']))}", 'phase.quantize="none"', "phase.max_turns=1",
            'run.mixed_precision="no"', "run.save_every=1", "run.batch_size=1", "run.grad_accum=1",
            'phase.title="Tiny Film"', 'phase.export_dtype="fp32"', 'run.optimizer="adamw"']
    return ["train", "b", "--data", str(files["data"]), "--out", str(out), "--no-progress",
            *[a for s in sets for a in ("--set", s)], *extra]


def test_phase_b_runs_resumes_and_prints_the_films_entry(files, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(phase_b_args(files, out, "--max-steps", "2", "--gpu-memory", "24GiB")) == 0
    said = capsys.readouterr().out
    assert "memory: --gpu-memory 24GiB: fits" in said
    assert "[films.tinyfilm]" in said and 'mllm_checkpoint = "MLLM-tinyfilm"' in said
    assert (out / "export" / "MLLM-tinyfilm" / "pytorch_model.bin").is_file()
    assert (out / "films.toml").is_file() and (out / "MODEL_CARD.md").is_file() and (out / "config.toml").is_file()
    assert main(phase_b_args(files, out, "--max-steps", "2")) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(phase_b_args(files, out, "--max-steps", "3", "--resume")) == 0
    steps = [json.loads(line)["step"] for line in (out / "losses.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_a_card_too_small_is_refused_before_anything_loads(files, tmp_path, capsys):
    assert main(phase_b_args(files, tmp_path / "run", "--gpu-memory", "0.01GiB")) == 2
    err = capsys.readouterr().err
    assert "does not fit" in err and "would do" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_plan_prints_the_table(capsys):
    assert main(["train", "plan", "b", "--gpu-memory", "24GB"]) == 0
    said = capsys.readouterr().out
    assert "| b |" in said and "phase (b) on --gpu-memory 24GB: fits" in said


def test_bad_input_is_one_clear_line(files, tmp_path, capsys):
    def refused(args: list[str], words: str) -> None:
        assert main(args) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err

    refused(["train", "b", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "o")], "no such folder")
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(_swap(phase_b_args(files, tmp_path / "o", "--no-fit"), empty), "manifest.jsonl")
    rejected = tmp_path / "rejected"
    shutil.copytree(files["data"], rejected)
    (rejected / "games.jsonl").write_text("")
    refused(_swap(phase_b_args(files, tmp_path / "o", "--no-fit"), rejected), "no training games")
    unfeatured = tmp_path / "unfeatured"
    shutil.copytree(files["data"], unfeatured)
    (unfeatured / "features" / "index.json").write_text("{}")
    refused(_swap(phase_b_args(files, tmp_path / "o", "--no-fit"), unfeatured), "no features")
    refused([*phase_b_args(files, tmp_path / "o", "--no-fit"), "--set", 'phase.base_model="/no/mistral"'], "no such file")
    refused([*phase_b_args(files, tmp_path / "o", "--no-fit"), "--set", "run.learning_rate=1"], "no setting")


def _swap(args: list[str], folder: Path) -> list[str]:
    out = list(args)
    out[out.index("--data") + 1] = str(folder)
    return out


@pytest.mark.slow
def test_phase_b_on_two_gloo_processes_equals_one(files, tmp_path):
    """`accelerate launch --config_file training/accelerate/cpu.yaml --num_processes 2` of the
    real command: the same losses as one process at the same global batch (2), within 1e-4
    (LoRA dropout off: each process draws its own masks)."""
    import os
    import subprocess
    import sys

    args = [*phase_b_args(files, tmp_path / "one", "--max-steps", "3", "--no-fit"), "--set", "run.batch_size=2",
            "--set", "phase.lora_dropout=0.0", "--set", "run.save_every=100", "--set", "phase.max_turns=2"]
    assert main(args) == 0
    root = Path(__file__).resolve().parents[2]
    two = [a if a != str(tmp_path / "one") else str(tmp_path / "two") for a in args]
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(root / "training/accelerate/cpu.yaml"),
               "--num_processes", "2", "-m", "animegamer.cli", *two]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=280,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    losses = [[json.loads(line)["loss"] for line in (tmp_path / name / "losses.jsonl").read_text().splitlines()]
              for name in ("one", "two")]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)
