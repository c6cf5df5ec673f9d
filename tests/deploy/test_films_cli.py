"""`animegamer films list|check`, and the commands that read an operator's films file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CUSTOM = """
[films.qiqi]
characters = [{ id = "qiqi", name = "Kiki" }, { id = "jiji", name = "Jiji" }]

[films.mononoke]
title = "Princess Mononoke"
mllm_checkpoint = "MLLM-Mononoke"
decoder_checkpoint = "VDM_Decoder-Mononoke"
characters = [{ id = "san", name = "San" }]
"""


def cli(tmp_path: Path, *args: str, films: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANIMEGAMER_")}
    env.update(PYTHONPATH=str(ROOT), ANIMEGAMER_DATA_DIR=str(tmp_path / "data"))
    if films is not None:
        env["ANIMEGAMER_FILMS"] = str(films)
    return subprocess.run([sys.executable, "-m", "animegamer.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


def test_list_shows_packaged_and_operator_films(tmp_path):
    r = cli(tmp_path, "films", "list")
    assert r.returncode == 0 and "qiqi (default)" in r.stdout and "ponyo:" in r.stdout
    custom = tmp_path / "films.toml"
    custom.write_text(CUSTOM)
    r = cli(tmp_path, "films", "list", films=custom)
    assert r.returncode == 0, r.stderr
    assert "mononoke: Princess Mononoke" in r.stdout and "Kiki [qiqi]" in r.stdout
    assert "(not on the hub: copied by hand)" in r.stdout and f"[{custom}]" in r.stdout


def test_check_lists_every_problem_with_file_film_and_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[films.qiqi]\ntitle = ""\n[films.new]\ntitle = "New"\n')
    r = cli(tmp_path, "films", "check", str(bad))
    assert r.returncode == 1
    assert f"{bad}: film 'qiqi': title: must be a non-empty string" in r.stderr
    assert f"{bad}: film 'new': characters: missing" in r.stderr
    good = tmp_path / "good.toml"
    good.write_text(CUSTOM)
    r = cli(tmp_path, "films", "check", str(good))
    assert r.returncode == 0 and "qiqi, ponyo, mononoke" in r.stdout


def test_a_bad_films_file_stops_every_command_at_start(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[films.qiqi]\nmotions = "fly"\n')
    for args, rc in ((("models", "list"), 2), (("doctor", "--no-network", "--skip", "gpu"), 1), (("worker", "--backend", "preview"), 2)):
        r = cli(tmp_path, *args, films=bad)
        assert r.returncode == rc, (args, r.stdout, r.stderr)
        assert f"{bad}: film 'qiqi': motions: must be a list of strings" in r.stderr + r.stdout, args
        assert "Traceback" not in r.stderr


def test_models_commands_read_the_operator_catalogue(tmp_path):
    custom = tmp_path / "films.toml"
    custom.write_text(CUSTOM)
    models = tmp_path / "models"
    r = cli(tmp_path, "models", "list", "--film", "mononoke", "--models-dir", str(models), films=custom)
    assert r.returncode == 0, r.stderr
    assert "MISSING  MLLM agent (MLLM-Mononoke)" in r.stdout and str(models / "animegamer" / "MLLM-Mononoke") in r.stdout
    r = cli(tmp_path, "models", "download", "mononoke", "--models-dir", str(models), films=custom)
    assert r.returncode == 1 and "names no hub_repo" in r.stderr and "copy MLLM-Mononoke/" in r.stderr
    r = cli(tmp_path, "models", "list", "--film", "totoro", "--models-dir", str(models))
    assert r.returncode == 2 and "Unknown film 'totoro'" in r.stderr


def test_worker_film_lists(tmp_path):
    r = cli(tmp_path, "worker", "--backend", "preview", "--film", "qiqi,totoro")
    assert r.returncode == 2 and "animegamer worker: Unknown film 'totoro'. Choose ponyo or qiqi." in r.stderr
    r = cli(tmp_path, "worker", "--help")
    assert "FILM[,FILM...]|all" in r.stdout
