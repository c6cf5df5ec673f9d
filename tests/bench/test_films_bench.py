"""bench/films.py tiny: the multi-film worker's benchmark, end to end on CPU (about 20 s), so that
it cannot rot. It prints figures only; this checks that every configuration ran and was compared,
not the figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_films_bench_tiny_runs_every_configuration(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "films.py"), "tiny", "--turns", "2"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for line in ("one worker, two films", "one worker per film (qiqi)", "one worker per film (ponyo)"):
        assert line in out, out[-3000:]
    assert "x the memory of two workers" in out and "Mistral-7B shapes, bf16" in out
