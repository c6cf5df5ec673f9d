"""Every use of torch beyond its public API, in one module.

The memory plan (inference/memory/live.py) counts the bytes a turn allocates by watching every
operator torch runs. torch has no public API for that; what it uses is here only, so an upgrade
has one file to check (tests/memory/test_torch_adapter.py fails, naming the installed version,
when any of it changes):

- `torch.utils._python_dispatch.TorchDispatchMode`: a context in which each ATen operator call
  reaches `__torch_dispatch__` with its outputs (the plan's live-bytes counter);
- `torch.utils._python_dispatch.is_traceable_wrapper_subclass`: whether a tensor is a subclass
  (torchao's quantised weights) whose memory is held by the inner tensors `__tensor_flatten__` names;
- `torch.utils._pytree.tree_leaves`: the tensors inside an operator's nested output.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_leaves

# The releases whose internals this module was checked against: pyproject's floor (the GPU
# machines' image) to the version CI installs (requirements/torch.txt).
OLDEST, NEWEST = "2.11", "2.13"

__all__ = ["NEWEST", "OLDEST", "TorchDispatchMode", "check_version", "installed_version", "is_traceable_wrapper_subclass",
           "tree_leaves"]


def installed_version() -> str:
    return torch.__version__


def _release(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def check_version() -> None:
    """Raise if the installed torch is outside the releases this module was written against."""
    v = installed_version()
    if not _release(OLDEST) <= _release(v) <= _release(NEWEST):
        raise RuntimeError(
            f"torch {v} is installed; inference/torch_adapter.py uses the internals of {OLDEST} to {NEWEST} "
            "(TorchDispatchMode, is_traceable_wrapper_subclass, tree_leaves): re-check them"
        )
