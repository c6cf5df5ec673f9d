"""`animegamer film prepare` end to end on a lavfi film: the folder it writes, the same manifest
from the same input, and a run killed with SIGKILL that continues where it stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import pytest

from animegamer.cli import main
from film.manifest import read_manifest
from tests.film.films import FILM, REASONS, cast_file, film  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]


def prepare(video: Path, out: Path, cast: Path, *extra: str) -> int:
    return main(["film", "prepare", str(video), "--out", str(out), "--characters", str(cast), "--no-progress", *extra])


@pytest.fixture(scope="module")
def prepared(film, cast_file, tmp_path_factory) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("prepared") / "set"
    assert prepare(film[0], out, cast_file) == 0
    return out


def test_the_folder_holds_clips_stills_and_the_manifest(prepared, film):  # noqa: F811
    clips = read_manifest(prepared)
    assert [c.id for c in clips] == ["film-0000-00", "film-0001-00", "film-0004-00", "film-0006-00", "film-0006-01"]
    for c in clips:
        assert c.status == "needs_review" and c.issue and c.source == str(film[0])
        assert c.end_s == pytest.approx(c.start_s + 17 / 8)
        assert len(c.stills) == 4 and all((prepared / s).is_file() for s in c.stills)
        with av.open(str(prepared / c.clip)) as container:
            stream = container.streams.video[0]
            frames = list(container.decode(stream))
            assert (len(frames), stream.codec_context.width, stream.codec_context.height) == (17, 720, 480)
            assert (stream.codec_context.name, stream.codec_context.pix_fmt, stream.average_rate) == ("h264", "yuv420p", 8)
    assert [c.motion_level for c in clips] == [3, 4, 1, 2, 2]
    skipped = [json.loads(line) for line in (prepared / "skipped.jsonl").read_text().splitlines()]
    assert {s["shot"]: s["reason"] for s in skipped} == REASONS
    assert (prepared / "games.jsonl").read_text() == ""  # nothing accepted yet
    assert json.loads((prepared / "cast.json").read_text())["characters"][0]["id"] == "qiqi"


def test_no_clip_crosses_a_cut(prepared, film):  # noqa: F811
    for c in read_manifest(prepared):
        assert not any(c.start_s < t < c.end_s - 1e-6 for t in film[1]), c


def test_the_same_input_gives_the_same_manifest(prepared, film, cast_file, tmp_path):  # noqa: F811
    again = tmp_path / "again"
    assert prepare(film[0], again, cast_file) == 0
    assert (again / "manifest.jsonl").read_bytes() == (prepared / "manifest.jsonl").read_bytes()
    assert (again / "skipped.jsonl").read_bytes() == (prepared / "skipped.jsonl").read_bytes()
    stamp = (again / "clips" / "film-0000-00.mp4").stat().st_mtime_ns
    assert prepare(film[0], again, cast_file) == 0  # a finished folder: nothing is done again
    assert (again / "clips" / "film-0000-00.mp4").stat().st_mtime_ns == stamp


def test_other_settings_are_refused_clearly(prepared, film, cast_file, capsys):  # noqa: F811
    assert prepare(film[0], prepared, cast_file, "--detector", "adaptive") == 2
    err = capsys.readouterr().err
    assert "prepared with other settings" in err and "detector: 'content' then, 'adaptive' now" in err


def test_a_run_interrupted_or_killed_continues_to_the_same_manifest(prepared, film, cast_file, tmp_path):  # noqa: F811
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "animegamer.cli", "film", "prepare", str(film[0]), "--out", str(out),
           "--characters", str(cast_file)]
    kills = 0
    # Ctrl-C once its cuts are written, then SIGKILL once the first shot's clips are.
    for stage, sig in (("cut", signal.SIGINT), ("clips", signal.SIGKILL)):
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if any((out / "stages" / stage).rglob("*.json")):
                os.kill(proc.pid, sig)
                kills += 1
                break
            time.sleep(0.02)  # sleep: poll interval: the signal must land the moment the stage's files appear
        _, err = proc.communicate()
        if sig == signal.SIGINT:
            assert proc.returncode == 130 and "interrupted; what was finished is kept" in err and "Traceback" not in err
    assert kills == 2 and not (out / "manifest.jsonl").exists()
    assert any((out / "clips").glob("*.mp4"))
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "clips and motion" in done.stderr  # the progress bars
    assert (out / "manifest.jsonl").read_bytes() == (prepared / "manifest.jsonl").read_bytes()
    assert not list(out.rglob(".*.tmp"))


def test_another_file_under_the_same_name_is_cut_again(cast_file, tmp_path):  # noqa: F811
    from testkit.lavfi import Shot, make_video

    video, out = tmp_path / "reel.mp4", tmp_path / "set"
    make_video(video, [Shot("pan", 2.5, 40, 1), Shot("pan", 2.5, 80, 2)])
    assert prepare(video, out, cast_file) == 0
    assert [c.id for c in read_manifest(out)] == ["reel-0000-00", "reel-0001-00"]
    make_video(video, [Shot("pan", 4.5, 40, 3)])
    assert prepare(video, out, cast_file) == 0
    assert [c.id for c in read_manifest(out)] == ["reel-0000-00", "reel-0000-01"]
    assert not (out / "stages" / "clips" / "reel" / "0001.json").exists()
