"""Imported first by every benchmark run as `python bench/NAME.py`.

Run as a script, a benchmark's folder comes first on sys.path, where `bench/queue.py` would
shadow the standard library's `queue` (which torch, asyncio and procrastinate import): move the
folder to the end (still there for a subprocess that re-imports a benchmark, as multiprocessing's
spawn does) and put the project root first.
"""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]
