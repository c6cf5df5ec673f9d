"""A quiet start: on a CPU machine the first lines a user sees are the program's own, not the
model libraries' known harmless warnings (animegamer.quiet_start)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The program's own log lines (animegamer.cli's format), from its own packages.
OWN_LOG = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ [A-Z]+ (animegamer|settings|i18n|game|contracts|db|inference|bot|play)[.:]")
IMPORT_ALL = """
import importlib, pkgutil
for pkg in ("animegamer", "settings", "i18n", "game", "contracts", "db", "inference", "bot", "play"):
    for m in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
        importlib.import_module(m.name)
import peft, diffusers, transformers  # the model code's libraries, whoever imports them first
"""


def cpu_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANIMEGAMER_") and k != "DATABASE_URL"}
    return {**env, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", **extra}


def test_doctor_prints_nothing_of_others_before_its_table(tmp_path, database_url):
    r = subprocess.run([sys.executable, "-W", "default", "-m", "animegamer.cli", "doctor", "--no-network"],
                       env=cpu_env(ANIMEGAMER_DATA_DIR=str(tmp_path), DATABASE_URL=database_url,
                                   ANIMEGAMER_BACKEND="animegamer"),
                       capture_output=True, text=True, timeout=300)
    lines = (r.stderr + r.stdout).splitlines()
    header = next(i for i, line in enumerate(lines) if re.match(r"^check\s+status\s+detail", line))
    before = [line for line in lines[:header] if not OWN_LOG.match(line)]
    assert before == [], "\n".join(lines[:header])
    assert "gpu" in r.stdout and "discord token  SKIP" in r.stdout


def test_the_model_libraries_import_quietly():
    """Every module of the project and the model libraries, imported after quiet_start with every
    warning shown (-W default): nothing on stderr."""
    code = "from animegamer.quiet_start import quiet_start\nquiet_start()\n" + IMPORT_ALL
    r = subprocess.run([sys.executable, "-W", "default", "-c", code], env=cpu_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stderr == "", r.stderr


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="torchao (the models extra) not installed")
def test_without_it_the_libraries_are_loud():
    """The control: the same imports without quiet_start print the torchao lines it silences (so
    the test above would see them come back)."""
    r = subprocess.run([sys.executable, "-c", IMPORT_ALL], env=cpu_env(), capture_output=True, text=True, timeout=300)
    assert "torchao" in r.stderr, r.stderr
