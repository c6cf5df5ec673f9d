"""bench/export.py runs: a game of finished turns stitched by /export's own code (the bot's
export_session on the service's dependencies), with its figures printed."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))  # last: bench/queue.py must not shadow the stdlib


async def test_export_bench_stitches_a_small_game(capsys):
    import export

    await export.main(turns=3, clip_kb=40)
    out = capsys.readouterr().out
    assert out.startswith("export of 3 shots, clip "), out
    assert "python heap peak during export:" in out and "time:" in out and "video " in out
