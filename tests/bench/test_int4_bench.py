"""bench/int4.py --tiny: the 4-bit deviation bench's code, end to end at tiny size, so it cannot rot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_int4_bench_tiny_compares_every_prompt(tmp_path):
    out = tmp_path / "int4.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "int4.py"), "--tiny", "--prompts", "2", "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in out.read_text().splitlines() if line.startswith("| 0 ") or line.startswith("| 1 ")]
    assert len(rows) == 2
    for r in rows:
        rel, cos = float(r[2]), float(r[3])
        assert 0 < rel < 0.2 and cos > 0.98, r  # 4-bit moves it a little, never to another representation
