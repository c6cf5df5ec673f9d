"""Host copies of modules' weights, and pointing the modules at them or at copies on a device.

Inference never changes a weight, so models can leave a GPU for free: their parameters and buffers
point at the one host copy again and the device memory is released. Bringing them back copies
from that host copy, non-blocking (from pinned memory when CUDA is there: the fastest
host-to-device path). Two users: the decoders' residency (several films' decoders sharing one GPU)
and the stage offload (one stage's models on the GPU at a time).

Only nn.Module's public API: `named_parameters`/`named_buffers(recurse=False)` to read,
`Parameter.data` and attribute assignment to point.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from inference.memory.live import plain_tensors


@dataclass
class WeightSlot:
    """One parameter or buffer of `owner`, and its host copy."""

    owner: nn.Module
    name: str
    is_param: bool
    host: torch.Tensor


def host_copies(modules: Iterable[nn.Module], pin: bool) -> list[WeightSlot]:
    """A host copy of every parameter and buffer of `modules` (pinned if `pin`). The modules
    still point at their own tensors: `point(slots, None)` moves them onto the copies."""
    slots = []
    for module in modules:
        for owner in module.modules():
            for name, p in owner.named_parameters(recurse=False):
                slots.append(WeightSlot(owner, name, True, _host(p, pin)))
            for name, b in owner.named_buffers(recurse=False):
                slots.append(WeightSlot(owner, name, False, _host(b, pin)))
    return slots


def _host(t: torch.Tensor, pin: bool) -> torch.Tensor:
    host = t.detach().to("cpu")
    if not pin:
        return host
    try:
        return host.pin_memory()
    except (RuntimeError, NotImplementedError):  # a tensor subclass without pinning: pageable, still correct
        return host


def nbytes(slots: Iterable[WeightSlot]) -> int:
    """Bytes of the host copies (a quantised tensor subclass counted by the tensors it holds)."""
    return sum(p.untyped_storage().nbytes() for s in slots for p in plain_tensors(s.host))


def point(slots: Sequence[WeightSlot], to: torch.device | None) -> None:
    """Point every weight at its host copy (to=None) or at a fresh copy on `to` (non-blocking)."""
    with torch.inference_mode(False):  # (a turn may run under inference mode; weights are normal tensors)
        for s in slots:
            t = s.host if to is None else s.host.to(to, non_blocking=True)
            if not s.is_param:
                setattr(s.owner, s.name, t)  # assigning a tensor to a buffer's name replaces the buffer
                continue
            param = getattr(s.owner, s.name)
            if param is None:  # the slot was taken from a set parameter; inference never unsets one
                raise RuntimeError(f"parameter {s.name} of {type(s.owner).__name__} was removed")
            if type(t) is torch.Tensor and type(param.data) is torch.Tensor:
                param.data = t
            else:  # a quantised tensor subclass: a new Parameter around it
                setattr(s.owner, s.name, nn.Parameter(t, requires_grad=False))
