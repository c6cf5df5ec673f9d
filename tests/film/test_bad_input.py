"""Bad input to `animegamer film prepare`: a clear message naming the file, the good files still
prepared, a non-zero exit status, no traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from animegamer.cli import main
from film.manifest import append_review, read_manifest
from testkit.lavfi import Shot, make_video
from tests.film.films import cast_file, film  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]


def prepare(videos: list[Path], out: Path, cast: Path) -> int:
    return main(["film", "prepare", *map(str, videos), "--out", str(out), "--characters", str(cast), "--no-progress"])


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, film) -> dict[str, Path]:  # noqa: F811
    folder = tmp_path_factory.mktemp("bad")
    text = folder / "notes.mp4"
    text.write_text("this is not a video\n")
    cut_short = folder / "truncated.mp4"  # the index (moov) is at the end: cut off, nothing is readable
    cut_short.write_bytes(film[0].read_bytes()[: film[0].stat().st_size // 2])
    short = folder / "short.mp4"
    make_video(short, [Shot("pan", 1.5, 40, 2)])
    return {"text": text, "truncated": cut_short, "short": short, "missing": folder / "missing.mp4"}


def test_bad_files_beside_a_good_one(film, cast_file, bad_files, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "set"
    assert prepare([bad_files["text"], film[0], bad_files["missing"], bad_files["truncated"], bad_files["short"]],
                   out, cast_file) == 1
    err = capsys.readouterr().err
    assert f"{bad_files['text']}: not a video" in err
    assert f"{bad_files['missing']}: no such file" in err
    assert f"{bad_files['truncated']}: not a video, or a damaged or truncated one" in err
    assert f"{bad_files['short']}: no clip can be made from it" in err
    assert "Traceback" not in err
    assert {c.source for c in read_manifest(out)} == {str(film[0])}  # the good one is prepared
    assert len(read_manifest(out)) == 5


def test_a_file_cut_short_keeps_what_could_be_read(film, cast_file, tmp_path, capsys):  # noqa: F811
    """An MP4 with its index first (+faststart) cut at 60 %: the shots before the cut are kept."""
    whole = tmp_path / "whole.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(film[0]), "-c", "copy", "-movflags", "+faststart",
                    str(whole)], check=True)
    part = tmp_path / "part.mp4"
    part.write_bytes(whole.read_bytes()[: whole.stat().st_size * 6 // 10])
    assert prepare([part], tmp_path / "set", cast_file) == 1
    err = capsys.readouterr().err
    assert f"{part}:" in err and ("truncated" in err or "damaged" in err)
    assert read_manifest(tmp_path / "set")  # the first shots' clips


def test_cast_problems_name_the_file(film, tmp_path, capsys):  # noqa: F811
    cast = tmp_path / "cast.toml"
    cast.write_text('[[characters]]\nid = "qiqi"\nname = "Qiqi"\nreference = "gone.png"\n')
    assert prepare([film[0]], tmp_path / "set", cast) == 2
    assert f"reference image {tmp_path / 'gone.png'} does not exist" in capsys.readouterr().err
    assert prepare([film[0]], tmp_path / "set", tmp_path / "nope.toml") == 2
    assert f"{tmp_path / 'nope.toml'}: no such file" in capsys.readouterr().err


def test_an_unknown_character_sends_its_clip_back_to_review(film, cast_file, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "set"
    assert prepare([film[0]], out, cast_file) == 0
    append_review(out, "film-0000-00", {"character": "nobody", "status": "accepted", "motion": "runs",
                                        "background": "sky", "social": 0, "entertainment": 0, "stamina": 1})
    assert prepare([film[0]], out, cast_file) == 1
    assert "film-0000-00: character 'nobody' is not in the cast (qiqi)" in capsys.readouterr().err
    clip = next(c for c in read_manifest(out) if c.id == "film-0000-00")
    assert clip.status == "needs_review" and "nobody" in (clip.issue or "")
    assert (out / "games.jsonl").read_text() == ""


def _private_tmpfs() -> list[str] | None:
    """A command prefix that runs a shell with a private mount namespace (to mount a small tmpfs)."""
    if shutil.which("unshare") is None:
        return None
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):
        if subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"], capture_output=True).returncode == 0:
            return prefix
    return None


def test_a_full_disk_stops_clearly_and_a_rerun_with_space_finishes(film, cast_file, tmp_path):  # noqa: F811
    prefix = _private_tmpfs()
    if prefix is None:
        pytest.skip("cannot mount a small tmpfs here (no unshare, no mount namespaces)")
    disk = tmp_path / "disk"
    disk.mkdir()
    reference = tmp_path / "reference"
    assert prepare([film[0]], reference, cast_file) == 0
    run = f"{sys.executable} -m animegamer.cli film prepare {film[0]} --out {disk}/set --characters {cast_file} --no-progress"
    script = (f"mount -t tmpfs -o size=600k tmpfs {disk} && cd {ROOT} && {{ {run}; echo first=$?; }} && "
              f"mount -o remount,size=64m {disk} && {{ {run}; echo second=$?; }} && "
              f"cmp {disk}/set/manifest.jsonl {reference}/manifest.jsonl && echo same")
    done = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=180)
    assert "first=1" in done.stdout, done.stdout + done.stderr
    assert "the disk is full; what was finished is kept" in done.stderr
    assert "Traceback" not in done.stderr
    assert "second=0" in done.stdout and "same" in done.stdout, done.stdout + done.stderr


def test_a_captioner_folder_that_is_no_model_is_named(film, cast_file, tmp_path, capsys):  # noqa: F811
    """The clips are made and kept; the captioner's folder is named; a rerun with none finishes."""
    out, not_a_model = tmp_path / "set", tmp_path / "empty-model"
    not_a_model.mkdir()
    args = ["film", "prepare", str(film[0]), "--out", str(out), "--characters", str(cast_file), "--no-progress"]
    assert main([*args, "--captioner", str(not_a_model)]) == 2
    err = capsys.readouterr().err
    assert f"captioner {not_a_model}: not a model folder" in err and "Traceback" not in err
    assert main([*args, "--captioner", "none"]) == 0
    assert all(c.status == "needs_review" for c in read_manifest(out))
