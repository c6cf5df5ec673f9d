"""bench/gpu.sh --tiny: the GPU benchmark's code, end to end at tiny size on CPU, so it cannot rot.

It prints figures only; this checks that every row ran and the table was written, not speeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # about 45 s of CPU; longer on a shared machine
def test_gpu_bench_tiny_runs_every_row(tmp_path):
    out = tmp_path / "table.md"
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu.sh"), "--tiny", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = out.read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith(("| preset", "| ---"))]
    assert [r.split("|")[1].strip() + "/" + r.split("|")[2].strip() for r in rows] == [
        "exact/resident", "fastest/resident", "fast/resident", "exact/low_vram",
    ]
    assert "failed" not in table
    assert "| reference |" in rows[0] and "PSNR" in rows[1]
    assert "torch " in table and "diffusers " in table


def test_model_stack_imports_without_the_service_stack():
    """The GPU machine has torch, transformers, peft, diffusers (from .whl) but no pydantic,
    SQLAlchemy, discord.py or Postgres: the bench's imports must not reach them."""
    code = (
        "import sys\n"
        "BLOCK = {'pydantic', 'pydantic_settings', 'sqlalchemy', 'discord', 'asyncpg', 'psycopg', 'procrastinate',"
        " 'aiohttp', 'alembic', 'settings', 'db', 'bot', 'play'}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCK:\n"
        "            raise ImportError('the model stack imported ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "sys.path.insert(0, 'bench')\n"
        "import gpu\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
