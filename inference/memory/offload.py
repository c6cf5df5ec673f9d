"""Stage offload: only the running stage's weights on the GPU, the others in (pinned) host memory.

A turn has three stages, each with its own weights: the MLLM pass (the MLLM), the denoise (the
DiT) and the VAE decode (the VAE). In the offload modes one stage's weights are on the GPU at a
time: `stage("mllm")` brings the MLLM and drops the others, `stage("dit", "vae")` the decoder (the
VAE's 0.4 GiB travel with the DiT, so their copy overlaps the denoise's start), and `release("dit")`,
called when the VAE decode begins, frees the DiT before the decode's activations come. A batch of
sessions shares one cycle: the MLLM micro-batch, then the decoder's batch.

Each weight has one host copy, pinned when CUDA is present, made once; bringing a group to the
device copies from it with non-blocking copies (queued on the current stream: the host returns at
once and the first kernels wait for their weights); dropping a group costs nothing, because
inference never changes weights: the modules point at the host copy again and the device copy is
freed. accelerate's `cpu_offload_with_hook` and diffusers' `enable_model_cpu_offload` do the same
job with `module.to(...)`: that copies every weight back to the host at each offload (twice the
PCIe traffic) into pageable memory (no non-blocking copies), and diffusers' needs a
DiffusionPipeline; the decoders' residency manager (inference.decoder.residency) already moves
weights this way, and this module shares its pointer swap.

One stage holds the device at a time: a turn's MLLM pass waits while another batch decodes.
On a CPU-only machine the "device" is the CPU: nothing moves, but which weights would be on the
GPU is tracked the same way (`device_bytes`), for the full-size bench to measure against the plan.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

import torch
from torch import nn

from inference.host_weights import host_copies, nbytes, point

log = logging.getLogger(__name__)

PCIE_GBPS = {"PCIe 3.0 x16": 12.0, "PCIe 4.0 x16": 25.0}  # GB/s reached in practice (10^9 bytes)


class StageOffload:
    """Groups of modules ("mllm", "dit", "vae"), one stage's groups on `device` at a time."""

    def __init__(self, groups: Mapping[str, Sequence[nn.Module]], device: torch.device | str):
        self.device = torch.device(device)
        pin = self.device.type == "cuda" and torch.cuda.is_available()
        self._slots = {name: host_copies(mods, pin) for name, mods in groups.items()}
        self.nbytes = {name: nbytes(slots) for name, slots in self._slots.items()}
        self._on: set[str] = set()
        self._lock = threading.Lock()  # held for a stage's duration: one stage on the device at a time
        self.moved_bytes = 0  # host -> device, since start
        self.cycles = 0
        for slots in self._slots.values():
            point(slots, None)  # start from the host copies (frees copies loaded on the GPU)
        if self.device.type == "cuda" and torch.cuda.is_available():
            torch.cuda.empty_cache()
        log.info("stage offload to %s: %s (pinned host copies: %s)", self.device,
                 ", ".join(f"{n} {b / 2**30:.2f} GiB" for n, b in self.nbytes.items()), pin)

    def bytes_per_cycle(self) -> int:
        """Host -> device bytes of one turn's cycle (every group brought once)."""
        return sum(self.nbytes.values())

    def device_bytes(self) -> int:
        """Weight bytes on the device now (what the GPU holds of weights in this stage)."""
        return sum(self.nbytes[g] for g in self._on)

    def on_device(self) -> list[str]:
        return sorted(self._on)

    @contextlib.contextmanager
    def stage(self, *names: str) -> Iterator[float]:
        """Hold the device for a stage: `names`' weights on it, every other group's off; yields the
        seconds spent issuing the copies (they complete on the stream before the first kernel)."""
        unknown = set(names) - self._slots.keys()
        if unknown:
            raise KeyError(f"no offload group {sorted(unknown)}; groups: {sorted(self._slots)}")
        with self._lock:
            t0 = time.perf_counter()
            for g in sorted(self._on - set(names)):
                self._drop(g)
            for g in names:
                if g not in self._on:
                    point(self._slots[g], self.device)
                    self._on.add(g)
                    self.moved_bytes += self.nbytes[g]
            if "mllm" in names:
                self.cycles += 1
            yield time.perf_counter() - t0

    def release(self, name: str) -> None:
        """Within a stage: free a group no longer needed (the DiT once the VAE decode begins)."""
        if name in self._on:
            self._drop(name)

    def _drop(self, name: str) -> None:
        point(self._slots[name], None)
        self._on.discard(name)


def transfer_seconds(nbytes: int) -> dict[str, float]:
    """Seconds to move `nbytes` host -> device at each PCIe generation's practical rate."""
    return {bus: nbytes / (gbps * 1e9) for bus, gbps in PCIE_GBPS.items()}


def offload_turn(mllm: nn.Module, decoder, device: torch.device | str) -> StageOffload:
    """The worker's offload: groups "mllm", "dit" and "vae" (an MLLM-only backend: "mllm"), and
    the DiT released when the VAE decode begins (a forward pre-hook on the VAE's decoder, which
    every decode path, tiled or not, runs)."""
    groups: dict[str, list[nn.Module]] = {"mllm": [mllm]}
    if decoder is not None:
        groups.update(dit=[decoder.transformer], vae=[decoder.vae])
    offload = StageOffload(groups, device)
    if decoder is not None:
        decoder.vae.decoder.register_forward_pre_hook(lambda module, args: offload.release("dit"))
    return offload
