"""The layers only point down: settings <- game <- contracts <- db <- inference <- service <- bot, play <- the
CLI (`animegamer`). The contracts live in pyproject.toml ([tool.importlinter]); a back-arrow, such as
the database layer importing the inference layer, fails this test with import-linter's report."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_a_back_arrow_is_caught(tmp_path):
    """The same contracts on a copy of the tree in which db imports inference: broken."""
    import shutil

    for pkg in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "db" / "turns.py").open("a") as f:
        f.write("\nfrom inference import backend  # a back-arrow\n")
    lint = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run([str(lint), "--config", str(tmp_path / "pyproject.toml")], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "db.turns -> inference.backend" in run.stdout
