"""The decoder phases' training set: the accepted clips with features (film.features' shards),
split into trained and held-out clips by the games' split, read lazily from the shards; and the
`[phase]` table of a decoder phase as its settings."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from film.games import GAMES
from film.manifest import read_features_index
from game.motion import motion_scope

log = logging.getLogger(__name__)


class DecoderDataError(ValueError):
    """A training folder the decoder phases cannot train on (the message names the file)."""


def phase_settings(cls: type, table: Mapping[str, Any], phase: str) -> Any:
    """A phase's `[phase]` table as its dataclass; an unknown key is refused, never ignored."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise DecoderDataError(f"[phase] of phase ({phase}) has no setting {', '.join(unknown)} "
                               f"(it has: {', '.join(known)})")
    return cls(**dict(table))


@dataclass(frozen=True)
class ClipItem:
    id: str
    shard: Path  # the safetensors file holding `<id>/latents`, `<id>/image`, `<id>/text`
    motion_level: int

    @property
    def flow(self) -> float:
        """The motion scope the decoder is conditioned on: the game's level -> flow table."""
        return motion_scope(self.motion_level)


def heldout_clip_ids(folder: Path) -> set[str]:
    """The clips of the held-out games (film.games' split by shot): never trained on."""
    path = folder / GAMES
    if not path.is_file():
        return set()
    ids: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            game = json.loads(line)
            if game.get("split") == "heldout":
                ids.update(t["clip"] for t in game["turns"])
    return ids


def clip_items(folder: Path) -> tuple[list[ClipItem], list[ClipItem]]:
    """(train, held out) accepted clips with features, in id order: the clips `film features`
    computes (film.features' own rule: a cast member and a motion); the others are said once."""
    from film.features import FeaturesError, accepted_clips

    folder = Path(folder)
    try:
        clips, _, left_out = accepted_clips(folder)
    except FeaturesError as e:
        raise DecoderDataError(str(e)) from None
    if left_out:
        log.warning("%s: %d accepted clip(s) lack a character or a motion and have no features, e.g. %s",
                    folder, len(left_out), left_out[:3])
    index = read_features_index(folder)
    missing = [c.id for c in clips if c.id not in index]
    if clips and len(missing) == len(clips):
        raise DecoderDataError(f"{folder}: no clip has features (run `animegamer film features DIR` first)")
    if missing:
        raise DecoderDataError(f"{folder}: {len(missing)} accepted clip(s) have no features, e.g. {missing[:3]} "
                               "(run `animegamer film features DIR` again: it computes only what is missing)")
    for rel in sorted(set(index[c.id] for c in clips)):
        if not (folder / rel).is_file():
            raise DecoderDataError(f"{folder / rel}: a features shard the index names is missing")
    held = heldout_clip_ids(folder)
    items = [ClipItem(c.id, folder / index[c.id], c.motion_level) for c in clips]
    return [i for i in items if i.id not in held], [i for i in items if i.id in held]


class ShardReader:
    """Tensors by key from safetensors shards, each opened once (lazily: nothing read up front)."""

    def __init__(self) -> None:
        self._open: dict[Path, Any] = {}

    def get(self, shard: Path, key: str) -> torch.Tensor:
        from safetensors import safe_open

        handle = self._open.get(shard)
        if handle is None:
            handle = self._open[shard] = safe_open(str(shard), framework="pt")
        try:
            return handle.get_tensor(key)
        except Exception as e:  # safetensors raises its own error type for a missing key
            raise DecoderDataError(f"{shard}: has no tensor {key!r} ({e})") from None

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers open their own handles
        return {"_open": {}}


class ClipFeatures(Dataset):
    """Phase (a)'s samples: a clip's latents, its T5 text and CLIP image features, its flow."""

    def __init__(self, items: list[ClipItem]):
        self.items = items
        self.reader = ShardReader()

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        item = self.items[i]
        return {
            "latents": self.reader.get(item.shard, f"{item.id}/latents"),
            "text": self.reader.get(item.shard, f"{item.id}/text"),
            "image": self.reader.get(item.shard, f"{item.id}/image"),
            "flow": torch.tensor(item.flow, dtype=torch.float32),
            "index": torch.tensor(i),
        }


def collate(items: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.stack([it[k] for it in items]) for k in items[0]}
