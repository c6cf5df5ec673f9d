"""bench/train_memory.py --tiny and bench/gpu.sh --train --tiny: the training memory bench and the
GPU bench's training mode, end to end at tiny size on the CPU, so that neither can rot. The plan's
accuracy is checked by tests/training/test_memory.py; here: every row ran and was written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("|")[1:-1]] for line in table.splitlines()
            if line.startswith("| ") and not line.startswith(("| phase", "| ---"))]


@pytest.mark.timeout(900)
def test_train_memory_tiny_prints_every_case(tmp_path):
    out = tmp_path / "table.md"
    proc = run([sys.executable, str(ROOT / "bench" / "train_memory.py"), "--tiny", "--layers", "1", "--turns", "1,5",
                "--out", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = rows(out.read_text())
    saving = " (backward's peak: the 8-bit step is not counted)"
    assert [(r[0], r[1]) for r in table] == [
        ("a", "1 block, 256 tokens, no checkpointing"), ("a", "1 block, 256 tokens, checkpointing"),
        ("a", "1 block, 256 tokens, checkpointing, adamw8bit" + saving),
        ("b", "1 layer, 1 turn, no checkpointing"), ("b", "1 layer, 5 turns, no checkpointing"),
        ("b", "1 layer, 1 turn, checkpointing"), ("b", "1 layer, 5 turns, checkpointing"),
        ("b", "1 layer, 5 turns, checkpointing, adamw8bit, int8 base" + saving)]
    ratios = [float(r[7]) for r in table]
    assert all(0.93 <= x <= 1.07 for x in ratios), ratios  # tests/training/test_memory.py says why 7 %


@pytest.mark.timeout(900)
def test_gpu_bench_train_tiny_runs_both_phases(tmp_path):
    out = tmp_path / "train.md"
    proc = run(["bash", str(ROOT / "bench" / "gpu.sh"), "--train", "--tiny", "--train-steps", "1",
                "--train-accum", "2", "--out", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    table = rows(text)
    assert [r[0] for r in table] == ["a", "b"] and "failed" not in text
    for r in table:
        assert float(r[2]) > 0 and float(r[4]) > 0 and float(r[5]) > 0  # micro-steps/s, measured, predicted
    assert "torch " in text
