"""`animegamer doctor`, run as a subprocess, reports each kind of failure on its own row."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from animegamer.doctor import FAIL, INFO, OK, SKIP, check_discord_token, check_models
from game.catalogue import get_film
from inference.model_paths import film_paths
from settings import Settings
from testkit.pg import fresh_database, migrate_to_head
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "MTEyMjMzNDQ1NTY2Nzc4ODk5.Gabcde.fake-signature"  # first part: base64 of a snowflake


def doctor(tmp_path: Path, env: dict[str, str], *args: str, gpu: bool = False) -> tuple[int, dict[str, tuple[str, str]], str]:
    """Run `animegamer doctor --json` in a clean environment; rows by check name. The GPU check
    (which imports torch, seconds on a busy machine) runs only where asked."""
    args = args if gpu else (*args, "--skip", "gpu")
    clean = {k: v for k, v in os.environ.items() if not (k.startswith("ANIMEGAMER_") or k == "DATABASE_URL")}
    clean.update(PYTHONPATH=str(ROOT), ANIMEGAMER_DATA_DIR=str(tmp_path / "data"), **env)
    # A hung doctor fails with subprocess's TimeoutExpired (generous: the machine may be busy).
    r = subprocess.run([sys.executable, "-m", "animegamer.cli", "doctor", "--no-network", "--json", *args],
                       cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=120)
    rows = {row["check"]: (row["status"], row["detail"]) for row in json.loads(r.stdout)}
    return r.returncode, rows, r.stdout + r.stderr


def fake_models(root: Path, film_id: str) -> None:
    """Placeholder files in the layout (the doctor checks presence, not contents)."""
    p = film_paths(root, get_film(film_id))
    for f in (p.mistral / "config.json", p.mistral / "model-00001-of-00002.safetensors",
              p.tokenizer / "tokenizer_config.json", p.agent_dir / "pytorch_model.bin",
              p.decoder / "decoder.json", p.decoder / "transformer" / "config.json",
              p.decoder / "transformer" / "diffusion_pytorch_model.safetensors",
              p.decoder / "vae" / "config.json", p.decoder / "vae" / "diffusion_pytorch_model.safetensors"):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")


def test_broken_settings_and_missing_ffmpeg(tmp_path):
    rc, rows, out = doctor(tmp_path, {"ANIMEGAMER_BACKLOG_CAP": "0", "ANIMEGAMER_FFMPEG": str(tmp_path / "no-ffmpeg")})
    assert rc == 1, out
    assert rows["settings"][0] == FAIL and "ANIMEGAMER_BACKLOG_CAP" in rows["settings"][1], out
    assert rows["database"][0] == SKIP and rows["migrations"][0] == SKIP
    assert rows["ffmpeg"][0] == FAIL and "ANIMEGAMER_FFMPEG" in rows["ffmpeg"][1], out


def test_unreachable_database_and_missing_models(tmp_path):
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/animegamer"
    rc, rows, out = doctor(tmp_path, {"DATABASE_URL": url, "ANIMEGAMER_BACKEND": "animegamer",
                                      "ANIMEGAMER_MODELS_DIR": str(tmp_path / "models")}, "--film", "ponyo")
    assert rc == 1, out
    assert rows["settings"][0] == OK
    assert rows["database"][0] == FAIL and "cannot connect" in rows["database"][1], out
    assert rows["migrations"][0] == SKIP
    assert rows["ffmpeg"][0] == OK, out
    status, detail = rows["models ponyo"]
    assert status == FAIL and "MLLM agent (MLLM-Ponyo)" in detail and "models download ponyo" in detail, out
    assert rows["discord token"][0] == SKIP


def test_unmigrated_database(tmp_path):
    with fresh_database("agdoc") as url:
        rc, rows, out = doctor(tmp_path, {"DATABASE_URL": url})
    assert rc == 1, out
    assert rows["database"][0] == OK, out
    assert rows["migrations"][0] == FAIL and "animegamer db upgrade" in rows["migrations"][1], out


def test_healthy_machine_exits_zero(tmp_path):
    models = tmp_path / "models"
    fake_models(models, "qiqi")
    with fresh_database("agdoc") as url:
        migrate_to_head(url)
        rc, rows, out = doctor(tmp_path, {"DATABASE_URL": url, "ANIMEGAMER_BACKEND": "animegamer",
                                          "ANIMEGAMER_MODELS_DIR": str(models)}, gpu=True)
    assert rc == 0, out
    assert rows["migrations"][0] == OK and rows["models qiqi"][0] == OK, out
    assert not any(s == FAIL for s, _ in rows.values()), out
    gpu = [s for name, (s, _) in rows.items() if name.startswith("gpu")]
    assert gpu and all(s in (OK, "WARN") for s in gpu), out  # no CUDA: WARN for this backend


def test_missing_models_are_only_info_for_the_preview_backend(tmp_path):
    s = Settings(_env_file=None, data_dir=tmp_path, backend="preview")
    (row,) = check_models(s, ["qiqi"])
    assert row.status == INFO and "not needed" in row.detail


class _FakeDiscord(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        ok = self.path == "/api/v10/users/@me" and self.headers["Authorization"] == f"Bot {TOKEN}"
        body = b'{"id": "112233445566778899", "username": "gamer", "bot": true}' if ok else b'{"message": "401: Unauthorized"}'
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def fake_discord():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeDiscord)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/v10"
    server.shutdown()


def test_discord_token_validity(fake_discord):
    good = check_discord_token(TOKEN, api=fake_discord)
    assert good.status == OK and "gamer" in good.detail
    bad = check_discord_token(TOKEN[:-3] + "xyz", api=fake_discord)
    assert bad.status == FAIL and "401" in bad.detail
    assert check_discord_token("not-a-token", api=fake_discord).status == FAIL
    unreachable = check_discord_token(TOKEN, api=f"http://127.0.0.1:{free_port()}/api/v10", timeout=2)
    assert unreachable.status == SKIP
    assert check_discord_token(None).status == SKIP


def test_table_rendering():
    from animegamer.doctor import WARN, Row, render

    text = render([Row("settings", OK, "fine"), Row("models qiqi", FAIL, "missing"), Row("gpu 0", WARN, "small")])
    lines = text.splitlines()
    assert lines[0].split() == ["check", "status", "detail"]
    assert lines[3].split(None, 3) == ["models", "qiqi", "FAIL", "missing"]
    assert lines[-1] == "1 OK, 1 FAIL, 1 WARN"


def test_gpu_mode_advice_names_the_mode_the_gpus_need():
    """By the memory plan's full-size prediction (cached on disk; traced once, ~1-5 min): auto (the
    default) answers with the mode it picks, OK on every card from 8 GB, with its seconds per turn;
    an explicit mode fits or is a FAIL (the worker refuses it at start), naming the mode that fits."""
    from animegamer.doctor import gpu_mode_advice
    from inference.memory.plan import usable_gib

    plain = Settings(_env_file=None)
    for gb, mode in ((8, "offload_int4"), (12, "offload"), (16, "offload"), (24, "low_vram"), (141, "resident")):
        row = gpu_mode_advice([usable_gib(gb)], plain)
        assert row.status == OK and row.detail.startswith(f"auto: {mode}") and "s per turn on an" in row.detail, row
        assert "estimate" in row.detail
    resident = Settings(_env_file=None, memory_mode="resident")
    row = gpu_mode_advice([24.0], resident)
    assert row.status == FAIL and "resident needs" in row.detail and "ANIMEGAMER_MEMORY_MODE=low_vram" in row.detail
    row = gpu_mode_advice([24.0], Settings(_env_file=None, memory_mode="low_vram"))
    assert row.status == OK and "GiB spare" in row.detail
    row = gpu_mode_advice([24.0, 24.0], resident)
    assert row.status == FAIL and "ANIMEGAMER_DECODER_DEVICE=cuda:1" in row.detail
    split = Settings(_env_file=None, mllm_device="cuda:0", decoder_device="cuda:1")
    assert gpu_mode_advice([24.0, 24.0], split).status == OK
    row = gpu_mode_advice([12.0], Settings(_env_file=None, memory_mode="low_vram"))
    assert row.status == FAIL and "ANIMEGAMER_MEMORY_MODE=offload" in row.detail
    row = gpu_mode_advice([4.0], plain)
    assert row.status == FAIL and "no mode fits" in row.detail and "offload_int4" in row.detail


def test_doctor_gpu_memory_without_a_gpu(capsys):
    """`doctor --gpu-memory 8GiB` (12, 16, 24) on a machine without a GPU: the plan's answer for
    that card, OK with default settings."""
    from animegamer.cli import main

    for size in ("8GiB", "12GiB", "16GiB", "24GiB", "24GB"):
        code = main(["doctor", "--skip", "database", "--skip", "models", "--no-network", "--gpu-memory", size])
        out = capsys.readouterr().out
        line = next(x for x in out.splitlines() if x.startswith("gpu mode"))
        assert code == 0 and " OK " in line and "auto: " in line and "s per turn" in line, out
        assert "FAIL" not in out, out
        # the 8 GB card's mode says what its 4-bit weights are known (and not known) to cost
        assert ("offload_int4" in line) == (size == "8GiB") == ("not measured yet" in line), line
    assert "22.4 GiB" in line and "low_vram" in line
    with pytest.raises(SystemExit):  # argparse's usage error, naming the form it takes
        main(["doctor", "--gpu-memory", "lots"])
    assert "24GiB or 24GB" in capsys.readouterr().err


def test_gpu_mode_advice_when_the_plan_cannot_run(monkeypatch):
    """Library versions whose model code cannot run on the meta device: a WARN row, not a crash."""
    from animegamer.doctor import WARN, gpu_mode_advice
    from inference.memory import choose_mode

    def broken(sessions):
        raise RuntimeError("unknown device type for autocast")

    monkeypatch.setattr(choose_mode, "predictions", broken)
    row = gpu_mode_advice([24.0], Settings(_env_file=None))
    assert row.status == WARN and "without its memory check" in row.detail
