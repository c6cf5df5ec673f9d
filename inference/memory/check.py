"""Does a memory mode fit the GPUs a worker has? The plan's answer, for `doctor` and the worker's start.

A worker refuses at start a mode that the plan predicts will not fit (with the plan's numbers and
the mode that would), instead of failing with an out-of-memory error in a player's turn.
`ANIMEGAMER_MEMORY_CHECK=0` (settings.memory_check) skips the check, for an operator who measured otherwise.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence

from .plan import MODES, Advice, Prediction, advise, predict

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
    return advise(gpus, mode_of(settings), sessions, predictions(sessions))


@functools.cache
def predictions(sessions: int) -> tuple[Prediction, ...]:
    """Every mode's prediction at `sessions` (traced once per process: ~20 s at full size)."""
    return tuple(predict(sessions=(sessions,), modes=MODES))


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
