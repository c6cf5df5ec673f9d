"""`animegamer models download` fails fast without a route to the hub; what it fetches lands in
the inference.model_paths layout; files are checked against the hub's sizes and sha256."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from game.catalogue import FILMS, get_film
from inference import models_cli
from inference.model_paths import film_paths
from inference.models_cli import Expected, ModelsError, fetch_plan, inventory, verify_files
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def run_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("ANIMEGAMER_", "HF_")) and k.lower() not in ("https_proxy", "http_proxy", "all_proxy")}
    clean.update(PYTHONPATH=str(ROOT), ANIMEGAMER_DATA_DIR=str(tmp_path / "data"), **(env or {}))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "animegamer.cli", *args], cwd=tmp_path, env=clean,
                       capture_output=True, text=True, timeout=60)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("endpoint, reason", [
    ("https://hub.invalid", "does not resolve"),  # .invalid never resolves: no DNS route
    (f"http://127.0.0.1:{free_port()}", "failed"),  # a host that refuses
])
def test_download_fails_fast_without_a_route(tmp_path, endpoint, reason):
    r, elapsed = run_cli(tmp_path, "models", "download", "qiqi", "--models-dir", str(tmp_path / "models"),
                         env={"HF_ENDPOINT": endpoint})
    assert r.returncode == models_cli.EXIT_NO_HUB, r.stdout + r.stderr
    assert "cannot reach the model hub" in r.stderr and reason in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert elapsed < 20, f"took {elapsed:.1f}s"
    assert not any((tmp_path / "models").rglob("*.bin"))


def test_probe_times_out_quickly_on_an_unanswered_connect(monkeypatch):
    """A dropped SYN (no route) is bounded by the probe timeout."""
    def hang(self, addr):
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket.socket, "connect", hang)
    with pytest.raises(models_cli.HubUnreachable, match="timed out"):
        models_cli.probe_hub("http://127.0.0.1:9", timeout=0.5)


@pytest.mark.parametrize("film_id", sorted(FILMS))
def test_plan_puts_files_where_model_paths_expects(tmp_path, film_id):
    film = get_film(film_id)
    paths = film_paths(tmp_path, film)
    plan = {f.repo_id: f for f in fetch_plan(tmp_path, film)}
    rel = lambda item, name: item.local_dir / name  # noqa: E731

    ag = plan[models_cli.ANIMEGAMER_REPO]
    name = film.model_name
    wanted = [f"MLLM-{name}/pytorch_model.bin", f"VDM_Decoder-{name}/latest", f"VDM_Decoder-{name}/1000/mp_rank_00_model_states.pt"]
    other = "Ponyo" if name != "Ponyo" else "Qiqi"
    for n in wanted:
        assert any(fnmatch.fnmatch(n, p) for p in ag.patterns), n
    assert not any(fnmatch.fnmatch(f"MLLM-{other}/pytorch_model.bin", p) for p in ag.patterns)
    assert rel(ag, wanted[0]) == paths.agent_dir / "pytorch_model.bin"
    assert rel(ag, wanted[1]) == paths.decoder_sat / "latest"

    mi = plan[models_cli.MISTRAL_REPO]
    assert mi.local_dir == paths.mistral
    for n in ("config.json", "model-00001-of-00002.safetensors", "tokenizer.model", "tokenizer_config.json"):
        assert any(fnmatch.fnmatch(n, p) for p in mi.patterns), n
    assert not any(fnmatch.fnmatch("pytorch_model-00001-of-00002.bin", p) for p in mi.patterns)

    vae = plan[models_cli.VAE_REPO]
    assert vae.target == paths.vae and vae.link_from == "vae"
    assert any(fnmatch.fnmatch("vae/diffusion_pytorch_model.safetensors", p) for p in vae.patterns)
    assert not any(fnmatch.fnmatch("transformer/config.json", p) for p in vae.patterns)


def _write(path: Path, data: bytes) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def test_verify_accepts_good_files_and_remembers_them(tmp_path, monkeypatch):
    good = b"weights" * 1000
    _write(tmp_path / "MLLM-Qiqi" / "pytorch_model.bin", good)
    _write(tmp_path / "config.json", b"{}")
    expected = [Expected("MLLM-Qiqi/pytorch_model.bin", len(good), hashlib.sha256(good).hexdigest()),
                Expected("config.json", 2, None)]
    verify_files(tmp_path, expected, log=lambda *_: None)
    # Second run: the ledger says it was verified; no hashing.
    monkeypatch.setattr(models_cli, "sha256_of", lambda p: pytest.fail("re-hashed a verified file"))
    verify_files(tmp_path, expected, log=lambda *_: None)


def test_verify_deletes_a_corrupt_or_short_file(tmp_path):
    good = b"weights" * 1000
    _write(tmp_path / "a.bin", b"X" + good[1:])
    _write(tmp_path / "b.bin", good[:-1])
    expected = [Expected("a.bin", len(good), hashlib.sha256(good).hexdigest()),
                Expected("b.bin", len(good), hashlib.sha256(good).hexdigest())]
    with pytest.raises(ModelsError) as e:
        verify_files(tmp_path, expected, log=lambda *_: None)
    assert "a.bin: sha256" in str(e.value) and "b.bin:" in str(e.value) and "rerun" in str(e.value)
    assert not (tmp_path / "a.bin").exists() and not (tmp_path / "b.bin").exists()


def test_vae_is_linked_into_the_layout(tmp_path):
    staged = tmp_path / ".hub" / "vae"
    _write(staged / "config.json", b"{}")
    _write(staged / "diffusion_pytorch_model.safetensors", b"w")
    models_cli._link_tree(staged, tmp_path / "cogvideox-vae")
    models_cli._link_tree(staged, tmp_path / "cogvideox-vae")  # idempotent
    out = tmp_path / "cogvideox-vae" / "config.json"
    assert out.read_bytes() == b"{}" and out.stat().st_ino == (staged / "config.json").stat().st_ino


def test_missing_converter_and_tokenizer_builder_give_clear_messages(tmp_path, monkeypatch):
    paths = film_paths(tmp_path, get_film("qiqi"))
    monkeypatch.setitem(sys.modules, "inference.decoder.convert", None)  # as if not there
    with pytest.raises(ModelsError, match="decoder converter .* cannot be imported.*--skip-decoder-convert"):
        models_cli.convert(paths, log=lambda *_: None)
    monkeypatch.setitem(sys.modules, "inference.mllm.tokens", None)
    said = []
    assert models_cli.build_tokenizer(paths, log=said.append) is False
    assert "github.com/TencentARC/AnimeGamer" in said[0] and str(paths.tokenizer) in said[0]


def test_models_list_shows_present_and_missing(tmp_path):
    paths = film_paths(tmp_path, get_film("qiqi"))
    _write(paths.agent_dir / "pytorch_model.bin", b"x")
    _write(paths.decoder_sat / "latest", b"1000\n")
    _write(paths.decoder_sat / "1000" / "mp_rank_00_model_states.pt", b"x")
    parts = {c.name: c.present for c in inventory(tmp_path, get_film("qiqi"))}
    assert parts["MLLM agent (MLLM-Qiqi)"] and parts["released decoder (VDM_Decoder-Qiqi)"]
    assert not parts["converted decoder"] and not parts["base LLM (Mistral-7B-Instruct-v0.1)"]
    r, _ = run_cli(tmp_path, "models", "list", "--models-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    qiqi = r.stdout.split("\nponyo")[0]
    assert "present  MLLM agent (MLLM-Qiqi)" in qiqi and "MISSING  converted decoder" in qiqi
    assert "MISSING  MLLM agent (MLLM-Ponyo)" in r.stdout


# ------------------------------------------------------------------------------------------
# The whole download through huggingface_hub, against a local stand-in for the hub.

from tests.deploy.fake_hub import FakeHub  # noqa: E402


def hub_repos() -> dict[str, dict[str, bytes]]:
    return {
        models_cli.ANIMEGAMER_REPO: {
            "MLLM-Qiqi/pytorch_model.bin": b"agent" * 200, "VDM_Decoder-Qiqi/latest": b"1000\n",
            "VDM_Decoder-Qiqi/1000/mp_rank_00_model_states.pt": b"dit" * 300,
            "MLLM-Ponyo/pytorch_model.bin": b"ponyo", "README.md": b"# AnimeGamer",
        },
        models_cli.MISTRAL_REPO: {
            "config.json": b"{}", "model-00001-of-00002.safetensors": b"m1" * 100,
            "model-00002-of-00002.safetensors": b"m2" * 100, "model.safetensors.index.json": b"{}",
            "pytorch_model-00001-of-00002.bin": b"same weights again", "tokenizer.model": b"sp",
            "tokenizer_config.json": b"{}",
        },
        models_cli.VAE_REPO: {
            "vae/config.json": b"{}", "vae/diffusion_pytorch_model.safetensors": b"vae" * 100,
            "transformer/diffusion_pytorch_model.safetensors": b"not wanted",
        },
    }


def test_download_lands_in_the_layout_and_a_rerun_fetches_nothing(tmp_path, monkeypatch):
    root = tmp_path / "models"
    # The tokenizer is built from Mistral's real files when inference.mllm can; these are stand-ins.
    _write(film_paths(root, get_film("qiqi")).tokenizer / "tokenizer_config.json", b"{}")
    with FakeHub(hub_repos()) as hub:
        r, _ = run_cli(tmp_path, "models", "download", "qiqi", "--models-dir", str(root), "--skip-decoder-convert",
                       env={"HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_PROGRESS_BARS": "1"})
        assert r.returncode == 0, r.stdout + r.stderr
        got = [q.split("/resolve/")[1].split("/", 1)[1] for q in hub.requests if q.startswith("GET") and "/resolve/" in q]
        assert sorted(got) == sorted([
            "MLLM-Qiqi/pytorch_model.bin", "VDM_Decoder-Qiqi/latest", "VDM_Decoder-Qiqi/1000/mp_rank_00_model_states.pt",
            "config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
            "model.safetensors.index.json", "tokenizer.model", "tokenizer_config.json",
            "vae/config.json", "vae/diffusion_pytorch_model.safetensors"])
        parts = {c.name: c.present for c in inventory(root, get_film("qiqi"))}
        assert all(parts[n] for n in ("base LLM (Mistral-7B-Instruct-v0.1)", "MLLM agent (MLLM-Qiqi)",
                                      "released decoder (VDM_Decoder-Qiqi)", "CogVideoX VAE")), parts
        paths = film_paths(root, get_film("qiqi"))
        assert (paths.vae / "diffusion_pytorch_model.safetensors").read_bytes() == b"vae" * 100

        # Again, in-process: everything is there and verified, so only metadata is asked for.
        before = len(hub.requests)
        monkeypatch.setattr(models_cli, "sha256_of", lambda p: pytest.fail(f"re-hashed {p}"))
        models_cli.download(root, get_film("qiqi"), skip_convert=True, endpoint=hub.url, log=lambda *_: None)
        assert all(q.startswith("GET /api/") for q in hub.requests[before:]), hub.requests[before:]


def test_download_rejects_bytes_that_do_not_match_the_hub(tmp_path):
    root = tmp_path / "models"
    with FakeHub(hub_repos()) as hub:
        hub.lie_about[(models_cli.ANIMEGAMER_REPO, "MLLM-Qiqi/pytorch_model.bin")] = b"AGENT" * 200  # same size
        with pytest.raises(ModelsError, match="pytorch_model.bin: sha256"):
            models_cli.download(root, get_film("qiqi"), skip_convert=True, endpoint=hub.url, log=lambda *_: None)
    assert not (film_paths(root, get_film("qiqi")).agent_dir / "pytorch_model.bin").exists()


def test_gated_mistral_says_what_to_do(tmp_path):
    with FakeHub(hub_repos(), gated={models_cli.MISTRAL_REPO}) as hub:
        r, _ = run_cli(tmp_path, "models", "download", "qiqi", "--models-dir", str(tmp_path / "m"),
                       "--skip-decoder-convert", env={"HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_PROGRESS_BARS": "1"})
    assert r.returncode == 1 and "is gated" in r.stderr and "HF_TOKEN" in r.stderr, r.stderr
