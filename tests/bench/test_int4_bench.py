"""bench/int4.py --tiny: the 4-bit deviation bench's code, end to end at tiny size, so it cannot rot.

The command runs once as a script; its --weights runs call its main() in this process (a start of
the model stack per run would add nothing the script's run does not prove)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.tiny import mllm as tiny_mllm

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))  # last: bench/queue.py must not shadow the stdlib


def _table(text: str) -> tuple[str, list[list[str]]]:
    return text, [line.split("|")[1:-1] for line in text.splitlines() if line.startswith(("| 0 ", "| 1 "))]


def _bench(tmp_path, *args: str) -> tuple[str, list[list[str]]]:
    """bench/int4.py run as a script."""
    out = tmp_path / "int4.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "int4.py"), "--prompts", "2", "--out", str(out), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _table(out.read_text())


def _bench_main(tmp_path, *args: str) -> tuple[str, list[list[str]]]:
    """bench/int4.py's main() in this process, as the script would run it."""
    import int4

    out = tmp_path / "int4.md"
    assert int4.main(["--prompts", "2", "--out", str(out), *args]) == 0
    return _table(out.read_text())


@pytest.mark.timeout(300)
def test_int4_bench_tiny_compares_every_prompt(tmp_path):
    _text, rows = _bench(tmp_path, "--tiny")
    assert len(rows) == 2
    for r in rows:
        rel, cos = float(r[2]), float(r[3])
        assert 0 < rel < 0.2 and cos > 0.98, r  # 4-bit moves it a little, never to another representation


@pytest.mark.timeout(300)
def test_int4_bench_loads_released_weights_through_the_workers_loader(tmp_path):
    """--weights: a checkpoint in the released key format (Mistral directory, tokenizer, agent
    .bin with its LoRA), loaded and merged as the worker does, compared int8 and int4."""
    files = tiny_mllm.build_all(tmp_path / "weights")
    weights = [str(files["mistral"]), str(files["tokenizer"]), str(files["agent"])]
    devs = {}
    for scheme in ("int8", "int4"):
        text, rows = _bench_main(tmp_path, "--weights", *weights, "--scheme", scheme)
        assert "The released weights (pytorch_model.bin, LoRA merged)" in text and f"states {scheme}" in text
        assert len(rows) == 2
        linear = float(text.split("relative L2 deviation ")[1].split(".\n")[0].rstrip("."))
        devs[scheme] = linear
        for r in rows:
            assert 0 < float(r[2]) < 0.3, r
    assert 0 < devs["int8"] < devs["int4"], devs  # 4 bits per weight err more than 8 on the same linear
