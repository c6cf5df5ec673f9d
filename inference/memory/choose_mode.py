"""Which memory mode a worker runs: chosen (auto) or checked (explicit) against the GPUs it has,
by the memory plan's answer; for `doctor` and the worker's start.

`ANIMEGAMER_MEMORY_MODE=auto` (the default) picks the fastest mode that fits the GPUs found at the
worker's number of sessions (`resolve`), and logs which and why; with no GPU in use it is
`resident` (nothing to fit). An explicit mode wins, and a worker refuses at start one that the plan
predicts will not fit (with the plan's numbers and the mode that would), instead of failing with
an out-of-memory error in a player's turn. `ANIMEGAMER_MEMORY_CHECK=0` (settings.memory_check)
skips the check, for an operator who measured otherwise. The plan's answer is cached on disk
(inference.memory.cache; `ANIMEGAMER_PLAN_CACHE_DIR`, default ~/.cache/animegamer/memory-plan).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .plan import MODES, Advice, Prediction, advise, choose

log = logging.getLogger(__name__)

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(gib|gb|g)?\s*$", re.IGNORECASE)


def parse_sizes(text: str) -> list[float]:
    """'24GiB' or '24GB,24GB' (one per GPU) -> GiB each; GB means 10^9 bytes as cards are sold."""
    sizes = []
    for part in text.split(","):
        m = _SIZE.match(part)
        if not m:
            raise ValueError(f"GPU memory must look like 24GiB or 24GB (one per GPU, comma-separated), got {part.strip()!r}")
        value, unit = float(m.group(1)), (m.group(2) or "gib").lower()
        sizes.append(value * 1e9 / 2**30 if unit == "gb" else value)
    return sizes


def cuda_totals() -> list[float]:
    """GiB of each CUDA device this process sees (none without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_properties(i).total_memory / 2**30 for i in range(torch.cuda.device_count())]


def mode_of(settings) -> str:
    """The plan's name for the settings' memory mode (two devices given: two_gpus)."""
    if settings.mllm_device and settings.decoder_device and settings.mllm_device != settings.decoder_device:
        return "two_gpus"
    return settings.memory_mode


def uses_cuda(settings) -> bool:
    wanted = [d for d in (settings.mllm_device, settings.decoder_device, settings.device) if d]
    return any(str(d).startswith("cuda") for d in wanted) or (settings.device == "auto" and bool(cuda_totals()))


def check(settings, sessions: int = 1, gpus: Sequence[float] | None = None) -> Advice | None:
    """The plan's advice for the settings' mode at `sessions` concurrent turns on `gpus` (GiB each;
    default: the CUDA devices found); None when there is nothing to check (no GPU in use)."""
    gpus = list(gpus) if gpus is not None else (cuda_totals() if uses_cuda(settings) else [])
    if not gpus:
        return None
    return advise(gpus, mode_of(settings), sessions, predictions(sessions))  # (auto: the pick)


@functools.cache
def predictions(sessions: int) -> tuple[Prediction, ...]:
    """Every mode's prediction at `sessions`: from the disk cache, else traced (~1-3 min at full
    size on two busy cores) and cached; once per process."""
    from .cache import cached_predict

    preds, _ = cached_predict(sessions=(sessions,), modes=MODES, cache_dir=os.environ.get("ANIMEGAMER_PLAN_CACHE_DIR"))
    return tuple(preds)


@dataclass(frozen=True)
class Resolved:
    """The memory mode a worker runs: the settings' or auto's pick, with the VAE tiles it fits."""

    mode: str  # resident | two_gpus | low_vram | offload | offload_int4
    tiles: tuple[int, int] | None = None
    why: str = ""


def resolve(settings, sessions: int = 1, gpus: Sequence[float] | None = None) -> Resolved:
    """The mode for these settings: explicit, or auto's pick for the GPUs found (or `gpus`, GiB each).
    Auto with no GPU in use: resident. Auto with no fitting mode: the smallest (the check refuses it)."""
    mode = mode_of(settings)
    gpus = list(gpus) if gpus is not None else (cuda_totals() if uses_cuda(settings) else [])
    if mode != "auto":
        tiles = None
        if gpus and mode in ("offload", "offload_int4"):
            tiles = advise(gpus, mode, sessions, predictions(sessions)).tiles
        return Resolved(mode, tiles, f"ANIMEGAMER_MEMORY_MODE={mode}")
    if not gpus:
        return Resolved("resident", None, "auto: no GPU in use, so nothing to fit: resident")
    pick = choose(gpus, sessions, predictions(sessions))
    return Resolved(pick.mode, pick.tiles, pick.message)


def refusal(settings, sessions: int) -> str | None:
    """Why a worker must not start with these settings (its mode will not fit its GPUs, with the
    plan's numbers and the mode that would), or None: it fits, no GPU is in use, or the check is off."""
    if not settings.memory_check:
        return None
    try:
        advice = check(settings, sessions)
    except Exception:  # noqa: BLE001  (a prediction that cannot run must not keep a worker from starting)
        log.warning("GPU memory: the memory plan could not run; starting without its check", exc_info=True)
        return None
    if advice is None:
        return None
    if advice.fits:
        log.info("GPU memory: %s", advice.message)
        return None
    return f"{advice.message} (ANIMEGAMER_MEMORY_CHECK=0 skips this check)"
