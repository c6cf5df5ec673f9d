"""The memory plan's GPU table, predicted without a GPU: every memory mode at 1, 2 and 4 sessions.

    .venv/bin/python bench/memory.py [--out FILE] [--sessions 1,2,4]

Traces a whole turn of the released models through the real model code on the meta device
(inference.memory.plan) and prints GiB allocated / reserved per stage and device, what each needs
with the CUDA context and workspaces, which card sizes each mode fits, and the seconds it took.
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import sys
from pathlib import Path

from inference.memory.plan import OVERHEAD_GIB, fit_table, table, timed_predict


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", default="1,2,4", help="comma-separated session counts")
    ap.add_argument("--out", default=None, help="Markdown file for the tables")
    args = ap.parse_args(argv)
    sessions = tuple(int(s) for s in args.sessions.split(","))
    preds, seconds = timed_predict(sessions=sessions)
    text = (f"# bench/memory.py: predicted GPU memory of a turn (GiB allocated / reserved)\n\n"
            f"Traced in {seconds:.0f} s. 'needs' adds {OVERHEAD_GIB} GiB for the CUDA context, cuBLAS/cuDNN "
            f"workspaces and fragmentation.\n\n{table(preds)}\n\nWhich cards each mode fits (GB as sold; "
            f"spare GiB at 1 session):\n\n{fit_table(preds)}\n")
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
