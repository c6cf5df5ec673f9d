"""bench/fullsize.py --tiny: the full-size CPU turn's code, end to end at tiny size, so it cannot rot.

It prints figures only; this checks that the command runs, every stage of every mode ran through
the real backend to an MP4, and the table carries the measured and predicted columns; and that it
refuses bad arguments (its main() in this process: a second start of the model stack would add
nothing the first run does not prove)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))  # last: bench/queue.py must not shadow the stdlib


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "bench" / "fullsize.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.timeout(600)
def test_fullsize_tiny_runs_every_stage_of_every_mode(tmp_path):
    out = tmp_path / "table.md"
    modes = ("resident", "low_vram", "offload", "offload_int4")
    proc = _run("--tiny", "--modes", ",".join(modes), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith(tuple(f"| {m} " for m in modes))]
    assert [(r[0].strip(), r[1].strip().split()[0]) for r in rows] == [
        (mode, stage) for mode in modes for stage in ("mllm", "denoise", "vae", "mp4")
    ]
    for r in rows:
        seconds, rss, live = (c.strip() for c in r[2:5])
        assert float(seconds) >= 0 and float(rss) > 0 and float(live) > 0, r
        if r[1].strip() != "mp4":
            assert 0.85 <= float(r[6]) <= 1.15, r  # predicted / measured
    assert text.count("MP4 (") == 4 and "torch " in text
    # The offload modes measure what the GPU would hold: each stage's weights on the device.
    assert text.count("device weights") >= 6 and "host -> device in the turn's cycle" in text


def _refused(capsys, *args: str) -> str:
    """What fullsize.main says on its way out with argparse's usage error (exit status 2)."""
    import fullsize

    with pytest.raises(SystemExit) as exited:
        fullsize.main(list(args))
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_fullsize_refuses_unknown_modes(capsys):
    assert "--modes takes some of resident, low_vram, offload, offload_int4" in _refused(capsys, "--tiny", "--modes", "everything")


def test_fullsize_refuses_vae_tiles_that_do_not_give_whole_frames(capsys):
    """diffusers' tiled decode pads tiles that do not fit the frame: found on the meta device in a
    second, not after an hour's run (a full-size run with 120x180 tiles made 496x760 frames)."""
    assert "--vae-tiles 16x24 gives 50x56 frames, not 32x48" in _refused(capsys, "--tiny", "--vae-tiles", "16x24")
