"""The memory plan's answer on disk: traced once (~20-60 s at full size), read back in milliseconds.

The key is a hash of everything that changes the answer: the model shapes (MistralConfig fields,
DiT and VAE configs, frame size, history window), the modes, the numbers of sessions, each trace's
precision (dtypes, quantisation, VAE tiles), the versions of torch, transformers, diffusers,
torchao and peft (their code is what is traced), and PLAN_VERSION, raised when the plan's own
counting changes. A file that cannot be read is traced again and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from .plan import MODES, SESSIONS, VAE_TILES, Prediction, Shapes, StagePrediction, jobs_for, predict

log = logging.getLogger(__name__)

PLAN_VERSION = 2  # 2: offload modes, VAE tiles and moved bytes per prediction
LIBRARIES = ("torch", "transformers", "diffusers", "torchao", "peft")


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "animegamer" / "memory-plan"


def versions() -> dict[str, str]:
    out = {}
    for lib in LIBRARIES:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = "absent"
    return out


def key(shapes: Shapes, sessions: Sequence[int], modes: Sequence[str], tiles: Sequence[tuple[int, int]] = VAE_TILES,
        device: str = "cuda") -> str:
    jobs = [(name, repr(p), list(st)) for name, p, st in jobs_for(modes, tiles)]
    parts = {"plan": PLAN_VERSION, "shapes": asdict(shapes), "sessions": list(sessions), "modes": list(modes),
             "tiles": [list(t) for t in tiles], "device": device, "jobs": jobs, "versions": versions()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def cached_number(name: str, parts: dict, compute, cache_dir: str | os.PathLike | None = None) -> float:
    """A number that takes seconds to count (the VAE decode's FLOPs), kept beside the plan's answer."""
    folder = Path(cache_dir or os.environ.get("ANIMEGAMER_PLAN_CACHE_DIR") or default_dir())
    digest = hashlib.sha256(json.dumps({"plan": PLAN_VERSION, "versions": versions(), **parts}, sort_keys=True,
                                       default=str).encode()).hexdigest()[:32]
    path = folder / f"{name}-{digest}.json"
    try:
        return float(json.loads(path.read_text())["value"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = float(compute())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"value": value}))
        tmp.replace(path)
    except OSError as e:
        log.warning("%s not cached (%s)", name, e)
    return value


def _dump(preds: Sequence[Prediction]) -> list[dict]:
    return [{"mode": p.mode, "sessions": p.sessions, "tiles": list(p.tiles) if p.tiles else None, "moved": p.moved_bytes,
             "devices": {d: {s: [v.allocated, v.reserved] for s, v in st.items()} for d, st in p.devices.items()}}
            for p in preds]


def _load(rows: list[dict]) -> list[Prediction]:
    return [Prediction(r["mode"], int(r["sessions"]),
                       {d: {s: StagePrediction(int(a), int(b)) for s, (a, b) in st.items()} for d, st in r["devices"].items()},
                       tuple(r["tiles"]) if r["tiles"] else None, int(r["moved"]))  # type: ignore[arg-type]
            for r in rows]


def cached_predict(sessions: Sequence[int] = SESSIONS, modes: Sequence[str] = MODES, shapes: Shapes | None = None,
                   cache_dir: str | os.PathLike | None = None, **kw) -> tuple[list[Prediction], bool]:
    """`plan.predict`, from the cache when this key was traced before; returns (predictions, hit)."""
    shapes = shapes or Shapes.full_size()
    folder = Path(cache_dir) if cache_dir is not None else default_dir()
    path = folder / f"{key(shapes, sessions, modes, kw.get('tiles', VAE_TILES), kw.get('device', 'cuda'))}.json"
    try:
        rows = json.loads(path.read_text())["predictions"]
        return _load(rows), True
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("memory plan cache %s unreadable (%s): tracing again", path, e)
    t = time.perf_counter()
    preds = predict(shapes, sessions, modes, **kw)
    log.info("memory plan traced in %.1f s; cached in %s", time.perf_counter() - t, path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"predictions": _dump(preds)}))
        tmp.replace(path)  # atomic: a second worker starting at once reads a whole file or none
    except OSError as e:
        log.warning("memory plan not cached (%s): it will be traced at the next start too", e)
    return preds, False
