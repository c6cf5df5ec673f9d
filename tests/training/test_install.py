"""`animegamer train install`: a phase-(b) and a decoder export (made by the export functions on
tiny random models, no training) put where the worker looks and merged into the films file; the
catalogue with that file offers the film and inference.model_paths finds its files; the refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from animegamer.cli import main
from game.films_file import read_films_file
from inference.model_inventory import inventory
from inference.model_paths import film_paths
from testkit.tiny.mllm import random_mllm
from tests.training.test_decoder_recipe import tiny_decoder_folder
from training.export import save_agent_checkpoint, write_film_entry
from training.install import InstallError, install

torch.set_num_threads(2)
CAST = [{"id": "tiny", "name": "Tiny"}, {"id": "bob", "name": "Bob"}]


def make_runs(root: Path, film_id: str = "tinyfilm") -> tuple[Path, Path]:
    """runs/b (export/MLLM-<id>/pytorch_model.bin, films.toml) and runs/c (export/decoder/,
    films.toml), as training.cli leaves them."""
    from training.decoder_export import export_decoder
    from training.decoder_recipe import add_lora, load_transformer

    b, c = root / "b", root / "c"
    agent = save_agent_checkpoint(random_mllm("cpu", torch.float32, rep_dim=16), b / "export" / f"MLLM-{film_id}" /
                                  "pytorch_model.bin", torch.float32)
    base = tiny_decoder_folder(root / "base")
    transformer = load_transformer(base)  # the decoder phases' DiT: the base with a LoRA on it
    add_lora(transformer, 2, 2)
    export_decoder(transformer, c / "export", uncond=None, base=base, vae=None, dtype="fp32")
    for run in (b, c):
        write_film_entry(run, film_id, "Tiny Film", agent.parent, Path(f"VDM_Decoder-{film_id}"), CAST)
    return b, c


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    return make_runs(tmp_path_factory.mktemp("runs"))


def test_install_copies_merges_and_the_worker_finds_the_film(runs, tmp_path, capsys, monkeypatch):
    b, c = runs
    models, films = tmp_path / "models", tmp_path / "films.toml"
    films.write_text('[films.other]\ntitle = "Other"\nmllm_checkpoint = "MLLM-other"\ndecoder_checkpoint = "D"\n'
                     'characters = [{ id = "x", name = "X" }]\n\n[films.tinyfilm]\ntitle = "Old"\n'
                     'mllm_checkpoint = "old"\ndecoder_checkpoint = "old"\ncharacters = [{ id = "y", name = "Y" }]\n')
    monkeypatch.setenv("ANIMEGAMER_FILMS", str(films))
    assert main(["train", "install", str(b), str(c), "--models", str(models)]) == 0
    said = capsys.readouterr().out
    assert "ANIMEGAMER_FILMS=" not in said  # the settings already name this file
    catalogue = read_films_file(films)  # what `animegamer films check` runs
    assert {"other", "tinyfilm", "qiqi"} <= set(catalogue)
    film = catalogue["tinyfilm"]
    assert film.title == "Tiny Film" and [ch.id for ch in film.characters] == ["tiny", "bob"]
    assert films.read_text(encoding="utf-8").count("[films.tinyfilm]") == 1
    paths = film_paths(models, film)
    agent = paths.agent_checkpoint()
    assert agent is not None and agent.stat().st_size > 0 and not paths.agent_dir.is_symlink()
    assert (paths.decoder / "decoder.json").is_file() and (paths.decoder / "transformer" / "config.json").is_file()
    assert not [p for p in paths.agent_dir.parent.iterdir() if p.name.startswith(".")]  # no temp sibling left
    # doctor's check: every part the worker loads from these folders is present; the SAT folder is not one
    parts = {p.name: p for p in inventory(models, film)}
    assert parts["MLLM agent (MLLM-tinyfilm)"].present and parts["converted decoder"].present
    assert not parts["released decoder (VDM_Decoder-tinyfilm)"].for_worker

    # again, linked: the earlier folders are replaced by links, the table stays one
    assert main(["train", "install", str(b), str(c), "--models", str(models), "--link"]) == 0
    assert paths.agent_dir.is_symlink() and paths.decoder.is_symlink() and paths.agent_checkpoint() is not None
    assert films.read_text(encoding="utf-8").count("[films.tinyfilm]") == 1


def test_without_a_films_setting_writes_models_films_toml_and_prints_the_line(runs, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANIMEGAMER_FILMS", raising=False)
    monkeypatch.setenv("ANIMEGAMER_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    assert main(["train", "install", *map(str, runs)]) == 0
    target = tmp_path / "models" / "films.toml"
    assert f"ANIMEGAMER_FILMS={target}" in capsys.readouterr().out.splitlines()
    assert "tinyfilm" in read_films_file(target)
    assert main(["films", "check", str(target)]) == 0


def test_refusals_are_one_line(runs, tmp_path, capsys):
    b, c = runs
    models = tmp_path / "models"

    def refused(*args: str) -> str:
        assert main(["train", "install", "--models", str(models), "--films", str(tmp_path / "f.toml"), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err
        return err

    assert "no decoder run was given" in refused(str(b)) and str(b) in refused(str(b))
    assert "no MLLM run was given" in refused(str(c))
    assert "no export" in refused(str(tmp_path))
    assert "no such run folder" in refused(str(tmp_path / "nothing"))
    assert not models.exists()

    qiqi_b, qiqi_c = make_runs(tmp_path / "qiqi", "qiqi")
    assert "packaged film" in refused(str(qiqi_b), str(qiqi_c))
    install([qiqi_b, qiqi_c], models, tmp_path / "q.toml", replace=True)
    assert read_films_file(tmp_path / "q.toml")["qiqi"].mllm_checkpoint == "MLLM-qiqi"

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert "cannot write" in refused(str(b), str(c), "--models", str(blocker / "models"))
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            with pytest.raises(InstallError, match="cannot write"):
                install([b, c], locked / "models", tmp_path / "g.toml")
        finally:
            locked.chmod(0o700)
