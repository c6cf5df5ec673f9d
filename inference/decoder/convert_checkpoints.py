"""Reading the released checkpoints for the decoder converter (inference.decoder.convert): the SAT
directory or file, torch checkpoints memory-mapped and weights-only unless trusted, the errors the
converter raises and the account it keeps of every source key.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

DIT_PREFIX = "model.diffusion_model."
SAT_WEIGHTS_NAME = "mp_rank_00_model_states.pt"


class ConversionError(ValueError):
    """The inputs cannot be converted; the message says why."""


class CheckpointKindError(ConversionError):
    """A file of the wrong kind was given (e.g. the VAE where the decoder belongs)."""


@dataclass
class KeyAccount:
    """What happened to every source key."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, key: str, action: str, targets: Sequence[str] = (), note: str = "") -> None:
        if key in self.entries:
            raise AssertionError(f"key accounted twice: {key}")
        entry: dict[str, Any] = {"action": action}
        if targets:
            entry["targets"] = list(targets)
        if note:
            entry["note"] = note
        self.entries[key] = entry

    def summary(self) -> dict[str, int]:
        return dict(Counter(e["action"] for e in self.entries.values()))

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary(), "keys": self.entries}



def describe_state_dict(keys: Sequence[str]) -> str:
    """Guess what a state dict is, for error messages."""
    ks = list(keys)
    if any(k.startswith(DIT_PREFIX) for k in ks):
        return "the SAT decoder checkpoint (model.diffusion_model.* keys)"
    if any(k.startswith(("llm.", "input_resampler.", "output_resampler.")) for k in ks):
        return "the AnimeGamer MLLM agent checkpoint (llm.* keys)"
    if any(k.startswith(("encoder.", "decoder.")) for k in ks):
        return "a 3D VAE checkpoint (encoder.*/decoder.* keys)"
    if any(k.startswith(("transformer_blocks.", "patch_embed.")) for k in ks):
        return "an already converted diffusers transformer"
    return f"an unrecognised state dict (first keys: {ks[:5]})"


def _unwrap(obj: Any, path: str) -> dict[str, Any]:
    for wrapper in ("module", "state_dict", "model"):
        if isinstance(obj, Mapping) and wrapper in obj and isinstance(obj[wrapper], Mapping):
            obj = obj[wrapper]
    if not isinstance(obj, Mapping) or not obj:
        raise CheckpointKindError(f"{path}: not a checkpoint state dict (got {type(obj).__name__})")
    if not any(isinstance(v, torch.Tensor) for v in obj.values()):
        raise CheckpointKindError(f"{path}: holds no tensors")
    # Non-tensor entries stay: the converters account for (or reject) every key.
    return {str(k): v for k, v in obj.items()}


def require_tensors(sd: Mapping[str, Any], what: str) -> None:
    odd = sorted(k for k, v in sd.items() if not isinstance(v, torch.Tensor))
    if odd:
        raise ConversionError(f"{what} entries that are not tensors (no conversion rule): {odd[:10]}")


def load_state_dict(path: str, trust_pickle: bool = False) -> dict[str, Any]:
    """torch.load with mmap (tensors are read lazily), weights only unless `trust_pickle`."""
    if not os.path.isfile(path):
        raise ConversionError(f"{path}: no such file")
    if path.endswith(".safetensors"):
        raise CheckpointKindError(
            f"{path}: a safetensors file; expected the released torch checkpoint (.pt)"
        )
    with open(path, "rb") as f:
        magic = f.read(4)
    # torch.save writes a zip archive (or, before torch 1.6, a pickle starting with its protocol byte).
    if magic != b"PK\x03\x04" and magic[:1] != b"\x80":
        raise CheckpointKindError(f"{path}: not a torch checkpoint (starts with {magic!r})")
    kwargs = {"map_location": "cpu", "weights_only": not trust_pickle}
    try:
        try:
            obj = torch.load(path, mmap=True, **kwargs)
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise
            # Legacy (non-zip) serialization cannot be memory-mapped: read it whole.
            print(f"warning: {path} cannot be memory-mapped ({e}); loading it into memory", file=sys.stderr)
            obj = torch.load(path, **kwargs)
    except pickle.UnpicklingError as e:
        if trust_pickle:
            raise CheckpointKindError(f"{path}: not a torch checkpoint ({e})") from e
        raise ConversionError(
            f"{path}: the file needs full unpickling (it stores objects besides tensors). If you trust "
            f"its source, rerun with --trust-pickle. ({str(e).splitlines()[0]})"
        ) from e
    except Exception as e:  # torch.load has no single error type for a foreign file
        raise CheckpointKindError(f"{path}: not a readable torch checkpoint ({type(e).__name__}: {e})") from e
    return _unwrap(obj, path)


def resolve_sat_checkpoint(src: str) -> str:
    """SAT directory (with `latest`) or the model-states file itself -> the file."""
    if os.path.isfile(src):
        return src
    if not os.path.isdir(src):
        raise ConversionError(f"{src}: no such file or directory")
    latest = os.path.join(src, "latest")
    if os.path.isfile(latest):
        with open(latest) as f:
            iteration = f.read().strip()
        path = os.path.join(src, iteration, SAT_WEIGHTS_NAME)
        if not os.path.isfile(path):
            raise ConversionError(f"{src}: `latest` says iteration {iteration!r} but {path} is missing")
        return path
    direct = os.path.join(src, SAT_WEIGHTS_NAME)
    if os.path.isfile(direct):
        return direct
    if os.path.isfile(os.path.join(src, "config.json")):
        raise CheckpointKindError(f"{src}: looks like a diffusers/transformers directory, not a SAT checkpoint")
    raise ConversionError(f"{src}: no `latest` file and no {SAT_WEIGHTS_NAME}: not a SAT checkpoint directory")

