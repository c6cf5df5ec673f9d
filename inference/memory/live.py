"""Live tensor bytes, counted at the dispatcher: what a turn holds at each moment, and its peak.

Every aten op's output storages are counted once (views share their storage) until Python frees
the storage; a tensor subclass (torchao's int8 weights) is counted through its inner tensors. The
count runs on real tensors (a measurement of a real run) and on fake tensors (a prediction: the
same ops at full size with no memory behind them), so the two are comparable number for number.

What it does not see: buffers a kernel allocates and frees inside one op (cuDNN/cuBLAS
workspaces, a CPU kernel's scratch); an RSS reading beside it shows those on the CPU.

On CUDA the caching allocator hands out blocks rounded up to 512 bytes (what
`torch.cuda.memory_allocated` counts); `reserved` adds the segment rounding of large blocks
(over 1 MiB: to 2 MiB), a lower bound of what `memory_reserved` reports (fragmentation is not
modelled; `plan` keeps a margin for it).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from inference.torch_adapter import TorchDispatchMode, is_traceable_wrapper_subclass, tree_leaves

MiB = 2**20
GiB = 2**30
SMALL_BLOCK = 512  # the CUDA caching allocator's rounding of every block
LARGE = MiB  # blocks above this come from large segments...
LARGE_ROUND = 2 * MiB  # ...rounded to 2 MiB


def cuda_block(nbytes: int) -> int:
    """Bytes the CUDA caching allocator allocates for a request of `nbytes`."""
    return max(SMALL_BLOCK, -(-nbytes // SMALL_BLOCK) * SMALL_BLOCK)


def cuda_segment(nbytes: int) -> int:
    """Bytes of reserved segment a request needs at least (large blocks rounded to 2 MiB)."""
    block = cuda_block(nbytes)
    return -(-block // LARGE_ROUND) * LARGE_ROUND if block > LARGE else block


def plain_tensors(t: torch.Tensor) -> Iterator[torch.Tensor]:
    """The tensors holding memory: `t` itself, or a subclass's inner tensors (recursively)."""
    if is_traceable_wrapper_subclass(t):
        names, _ = t.__tensor_flatten__()  # type: ignore[attr-defined]  # the subclass protocol
        for name in names:
            inner = getattr(t, name)
            if isinstance(inner, torch.Tensor):
                yield from plain_tensors(inner)
    else:
        yield t


@dataclass
class StagePeak:
    name: str
    start: int = 0  # live bytes when the stage began
    peak: int = 0  # highest live bytes during the stage
    reserved_peak: int = 0  # the same with segment rounding (CUDA)
    largest: int = 0  # largest single storage allocated in the stage
    largest_shape: tuple = ()
    largest_dtype: str = ""


class LiveBytes(TorchDispatchMode):
    """Counts live storage bytes on one device type ("cuda", "cpu"); `cuda_rounding` adds the
    caching allocator's block rounding (for a CUDA prediction).

    Use `adopt()` for tensors that exist before counting starts (the weights), and `stage(name)`
    to split the run: each stage records its peak and its largest allocation."""

    def __init__(self, device_type: str, cuda_rounding: bool = False):
        super().__init__()
        self.device_type = device_type
        self.rounding = cuda_rounding
        self.live = 0
        self.reserved = 0
        self._sizes: dict[int, tuple[int, int, weakref.ref]] = {}
        self.stages: list[StagePeak] = []
        self._current: StagePeak | None = None

    # -- counting ---------------------------------------------------------------------------

    def adopt(self, tensors: Iterable[torch.Tensor]) -> int:
        """Count tensors made before counting started; returns the bytes added."""
        before = self.live
        for t in tensors:
            self._track(t)
        return self.live - before

    def _track(self, t: torch.Tensor) -> None:
        for p in plain_tensors(t):
            if p.device.type != self.device_type:
                continue
            storage = p.untyped_storage()
            key = id(storage)
            if key in self._sizes:
                continue
            n = storage.nbytes()
            size = (cuda_block(n), cuda_segment(n)) if self.rounding else (n, n)
            # a weak reference whose callback frees the bytes (cheaper than weakref.finalize)
            self._sizes[key] = (size[0], size[1], weakref.ref(storage, lambda _, k=key: self._free(k)))
            self.live += size[0]
            self.reserved += size[1]
            stage = self._current
            if stage is not None:
                if size[0] > stage.largest:
                    stage.largest, stage.largest_shape, stage.largest_dtype = size[0], tuple(p.shape), str(p.dtype)
                stage.peak = max(stage.peak, self.live)
                stage.reserved_peak = max(stage.reserved_peak, self.reserved)

    def _free(self, key: int) -> None:
        size = self._sizes.pop(key, None)
        if size is not None:
            self.live -= size[0]
            self.reserved -= size[1]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self._track(out)
        elif isinstance(out, tuple | list):
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self._track(t)
        return out

    # -- stages -----------------------------------------------------------------------------

    def begin(self, name: str) -> StagePeak:
        """End the current stage (if any) and start `name`."""
        stage = StagePeak(name, start=self.live, peak=self.live, reserved_peak=self.reserved)
        self.stages.append(stage)
        self._current = stage
        return stage

    def end(self) -> None:
        self._current = None

    @contextmanager
    def stage(self, name: str):
        stage = self.begin(name)
        try:
            yield stage
        finally:
            self.end()

    def peak(self, name: str) -> StagePeak:
        """The stage called `name` (the highest peak if it ran more than once)."""
        found = [s for s in self.stages if s.name == name]
        if not found:
            raise KeyError(f"no stage {name!r}; stages: {[s.name for s in self.stages]}")
        return max(found, key=lambda s: s.peak)
