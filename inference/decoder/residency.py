"""Several films' decoders on one GPU: kept there while the memory budget allows, otherwise moved
between GPU and pinned CPU memory, least recently used first.

Each decoder's weights (DiT and VAE parameters and buffers) get one CPU copy, pinned when CUDA is
present. Bringing a decoder to the GPU copies from that copy (non-blocking, from pinned memory:
the fastest host-to-device path); sending it back costs nothing, because inference never changes
weights: the modules simply point at the CPU copy again and the GPU memory is freed. A decoder in
use by a turn is never sent back; a turn that needs room waits until one is free.

`use(film)` is what a turn calls: it yields the decoder, on the device, and the seconds spent
moving weights for it (0 when it was already there), which the backend adds to the turn's timings.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import torch
from torch import nn

from inference.host_weights import WeightSlot, host_copies, nbytes, point

log = logging.getLogger(__name__)

D = TypeVar("D")  # the decoder type (AnimeGamerDecoder in the worker)


def decoder_modules(decoder) -> list[nn.Module]:
    """The torch modules holding a decoder's weights (AnimeGamerDecoder: the DiT and the VAE)."""
    return [m for m in (getattr(decoder, "transformer", None), getattr(decoder, "vae", None)) if isinstance(m, nn.Module)]


@dataclass
class _Entry(Generic[D]):
    film: str
    decoder: D
    slots: list[WeightSlot]
    nbytes: int
    on_device: bool = False
    users: int = 0
    last_used: int = 0
    moves: int = 0  # times brought to the device (for metrics and tests)


@dataclass
class Residency:
    """What `snapshot()` reports."""

    resident: list[str]
    budget_bytes: int | None
    used_bytes: int
    moves: dict[str, int] = field(default_factory=dict)


class DecoderResidency(Generic[D]):
    def __init__(self, decoders: Mapping[str, D], device: torch.device | str, budget_bytes: int | None = None):
        """`decoders`: film id -> decoder (its weights on the CPU or already on `device`).
        `budget_bytes`: device memory the decoders' weights may take together (None: no limit)."""
        self.device = torch.device(device)
        self.budget = budget_bytes
        self._cond = threading.Condition()
        self._clock = itertools.count(1)
        pin = torch.cuda.is_available() and self.device.type == "cuda"
        self._entries = {film: self._entry(film, d, pin) for film, d in decoders.items()}
        # Warm start: as many as fit go to the device now, in the given order.
        for e in self._entries.values():
            if self.budget is None or self._used() + e.nbytes <= self.budget:
                self._bring(e)
        log.info("decoders on %s: %s (budget %s)", self.device, ", ".join(self.resident()) or "none",
                 "none" if self.budget is None else f"{self.budget / 2**30:.1f} GiB")

    @staticmethod
    def _entry(film: str, decoder: D, pin: bool) -> _Entry[D]:
        slots = host_copies(decoder_modules(decoder), pin)
        point(slots, to=None)  # start from the CPU copy (frees a copy that was loaded on the GPU)
        return _Entry(film, decoder, slots, nbytes(slots))

    # -- public --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def use(self, film: str) -> Iterator[tuple[D, float]]:
        entry = self._entries.get(film)
        if entry is None:
            raise KeyError(f"no decoder for film {film!r} (loaded: {', '.join(self._entries)})")
        moved = 0.0
        with self._cond:
            while not entry.on_device:
                if self._make_room(entry):
                    moved = self._bring(entry)
                else:
                    self._cond.wait()  # every resident decoder is busy: wait for a turn to finish
            entry.users += 1
            entry.last_used = next(self._clock)
        try:
            yield entry.decoder, moved
        finally:
            with self._cond:
                entry.users -= 1
                self._cond.notify_all()

    def resident(self) -> list[str]:
        return [f for f, e in self._entries.items() if e.on_device]

    def snapshot(self) -> Residency:
        with self._cond:
            return Residency(self.resident(), self.budget, self._used(), {f: e.moves for f, e in self._entries.items()})

    def nbytes(self, film: str) -> int:
        return self._entries[film].nbytes

    # -- internals (called with the condition held) ---------------------------------------------

    def _used(self) -> int:
        return sum(e.nbytes for e in self._entries.values() if e.on_device)

    def _make_room(self, entry: _Entry) -> bool:
        """Evict idle decoders, least recently used first, until `entry` fits; False: wait."""
        while self.budget is not None and self._used() + entry.nbytes > self.budget:
            idle = [e for e in self._entries.values() if e.on_device and e.users == 0]
            if not idle:
                if any(e.on_device for e in self._entries.values()):
                    return False
                log.warning("the %s decoder (%.1f GiB) is larger than the decoder budget (%.1f GiB); running it anyway",
                            entry.film, entry.nbytes / 2**30, self.budget / 2**30)
                return True
            victim = min(idle, key=lambda e: e.last_used)
            point(victim.slots, to=None)
            victim.on_device = False
            log.info("decoder %s moved off %s to make room for %s", victim.film, self.device, entry.film)
        return True

    def _bring(self, entry: _Entry) -> float:
        t0 = time.perf_counter()
        point(entry.slots, to=self.device)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        entry.on_device = True
        entry.moves += 1
        return time.perf_counter() - t0

