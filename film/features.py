"""Features computed once for training (`animegamer film features DIR`), so that training never
holds the VAE, CLIP or T5 beside the DiT.

For each accepted clip (the manifest with the review's edits), in shards of SHARD_CLIPS clips:
- `<clip id>/latents`: the VAE latents of the clip's 17 frames, (5, 16, 60, 90) at 480x720: the
  posterior mean times the scaling factor, in the sampler's (T, C, h, w) layout (film.encoders);
- `<clip id>/image`: CLIP's patch tokens of the clip's first frame, (196, 768) at ViT-B/16;
- `<clip id>/text`: T5's features of the clip's action description, (30, 4096) with
  t5-v1_1-xxl. The text encoded is the instruction the game sends for that turn,
  `Character: {name}; Motion: {adverb} {motion}; Background: {time} {background}.`
  (game.instruction.format_instruction), built from the clip's reviewed fields, so phase (a) is
  trained on the same kind of text the MLLM reads.
All bfloat16 (training runs in bf16): about 0.9 + 0.3 + 0.25 MB a clip at full size.

Layout: `features/shard-00000.safetensors`, ... Each shard's metadata (one key, `animegamer`, a
JSON object) names its clips, their texts and the three models. `features/index.json` (clip id ->
shard path relative to DIR) is rewritten atomically after each shard, so a run stopped at any
moment continues with whole shards: the clips not in the index, in id order, cut into shards
numbered after the last, which for an interrupted run are the shards it would have written. The
manifest is then rewritten with each clip's `features`.

Memory: one model at a time, per shard: the VAE encodes the shard's clips (tiled, one clip at a
time), then is freed; CLIP reads their first frames; T5 their texts. Models are read from disk
again for each shard; with 256 clips a shard that is seconds against minutes of VAE work.
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from film.cast import CastError, read_cast
from film.encoders import ModelFolderError, check_folders, encode_latents, image_features, text_features
from film.manifest import (
    FEATURES_INDEX,
    MANIFEST,
    Clip,
    read_features_index,
    read_manifest,
    read_review,
    with_review,
    write_lines,
    write_manifest,
)
from film.model_identity import model_identity
from game.instruction import format_instruction

FEATURES_DIR = "features"
SHARD_CLIPS = 256  # ~0.8 GB a shard at full size in bf16
STORE_DTYPE = torch.bfloat16
META_KEY = "animegamer"
FORMAT = "animegamer-film-features/1"
CLIP_FRAMES = 17


class FeaturesError(Exception):
    """What stops the run; the message names the file or folder. Finished shards are kept."""


@dataclass(frozen=True)
class Models:
    vae: Path
    t5: Path
    clip: Path

    def identities(self) -> dict[str, str]:
        return {"vae": model_identity(self.vae), "t5": model_identity(self.t5), "clip": model_identity(self.clip)}


def action_text(clip: Clip, names: dict[str, str]) -> str:
    """The text T5 encodes for a clip: the game's instruction from its fields."""
    assert clip.character is not None and clip.motion
    return format_instruction([names[clip.character]], clip.motion, clip.adverb or "", clip.background or "",
                              clip.time or "")


def shard_name(n: int) -> str:
    return f"{FEATURES_DIR}/shard-{n:05d}.safetensors"


def read_clip_frames(folder: Path, clip: Clip) -> np.ndarray:
    """The clip's MP4 as uint8 (17, H, W, 3) RGB, decoded by PyAV."""
    import av
    from av.error import FFmpegError

    path = folder / clip.clip
    try:
        with av.open(str(path)) as container:
            frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    except (OSError, FFmpegError) as e:
        raise FeaturesError(f"{path}: cannot read clip {clip.id}: {e}") from None
    if len(frames) != CLIP_FRAMES:
        raise FeaturesError(f"{path}: clip {clip.id} has {len(frames)} frames, not {CLIP_FRAMES}")
    return np.stack(frames)


def pick_device() -> tuple[torch.device, torch.dtype]:
    """A GPU in bfloat16 when there is one (as training), else the CPU in float32."""
    if torch.cuda.is_available():
        return torch.device("cuda"), torch.bfloat16
    return torch.device("cpu"), torch.float32


def free() -> None:
    """Give back the memory of the model just deleted before the next one loads."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def shard_tensors(folder: Path, clips: list[Clip], texts: dict[str, str], models: Models, batch: int,
                  step: Callable[[str, int], None]) -> dict[str, torch.Tensor]:
    """The three models in turn over one shard's clips; each freed before the next loads."""
    from film.encoders import load_clip, load_t5, load_vae

    device, dtype = pick_device()
    out: dict[str, torch.Tensor] = {}
    first_frames: dict[str, np.ndarray] = {}
    vae = load_vae(models.vae, device, dtype)
    for group in batches(clips, batch):
        step("vae", 0)
        frames = [read_clip_frames(folder, c) for c in group]
        latents = encode_latents(vae, np.stack(frames))
        for c, f, z in zip(group, frames, latents, strict=True):
            first_frames[c.id] = f[0]
            out[f"{c.id}/latents"] = z.to(STORE_DTYPE).contiguous()
        step("vae", len(group))
    del vae
    free()
    clip_model = load_clip(models.clip, device, dtype)
    step("clip", 0)
    for group in batches(clips, batch):
        feats = image_features(clip_model, np.stack([first_frames[c.id] for c in group]))
        for c, f in zip(group, feats, strict=True):
            out[f"{c.id}/image"] = f.to(STORE_DTYPE).contiguous()
    del clip_model
    free()
    tokenizer, t5 = load_t5(models.t5, device, dtype)
    step("t5", 0)
    for group in batches(clips, batch):
        feats = text_features(tokenizer, t5, [texts[c.id] for c in group])
        for c, f in zip(group, feats, strict=True):
            out[f"{c.id}/text"] = f.to(STORE_DTYPE).contiguous()
    del tokenizer, t5
    free()
    return out


def write_shard(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """A shard written whole or not at all (a temporary file, fsynced, renamed)."""
    import os
    import tempfile

    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        # One metadata key holding sorted JSON: the same shard is the same bytes.
        save_file(tensors, tmp, metadata={META_KEY: json.dumps(meta, sort_keys=True, ensure_ascii=False)})
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def shard_meta(folder: Path, rel: str) -> dict[str, Any]:
    from safetensors import safe_open

    with safe_open(str(folder / rel), framework="pt") as f:
        return json.loads((f.metadata() or {})[META_KEY])


def check_done(folder: Path, index: dict[str, str], models: dict[str, str]) -> None:
    """The shards already written must exist and come from the same models."""
    for rel in sorted(set(index.values())):
        try:
            meta = shard_meta(folder, rel)
        except Exception as e:  # any failure to read it (safetensors raises its own SafetensorError)
            raise FeaturesError(f"{folder / rel}: a shard the index names cannot be read ({e}); "
                                f"delete {folder / FEATURES_DIR} to compute the features again") from None
        if meta.get("models") != models:
            raise FeaturesError(f"{folder / rel}: computed with other models ({meta.get('models')}); delete "
                                f"{folder / FEATURES_DIR} to compute every clip's features with these")


def accepted_clips(folder: Path) -> tuple[list[Clip], dict[str, str], list[str]]:
    """The accepted clips that have the fields a text needs, their texts, and the ids left out."""
    if not (folder / MANIFEST).is_file():
        raise FeaturesError(f"{folder}: no {MANIFEST} (run `animegamer film prepare` first)")
    try:
        clips = with_review(read_manifest(folder), read_review(folder))
        names = {m.id: m.name for m in read_cast(folder).members}
    except (ValueError, CastError) as e:
        raise FeaturesError(str(e)) from None
    accepted = sorted((c for c in clips if c.status == "accepted"), key=lambda c: c.id)
    if not accepted:
        raise FeaturesError(f"{folder}: no accepted clips (accept some on the review page: "
                            "animegamer film review DIR)")
    usable = [c for c in accepted if c.character in names and c.motion]
    left_out = [c.id for c in accepted if not (c.character in names and c.motion)]
    return usable, {c.id: action_text(c, names) for c in usable}, left_out


def run(folder: Path, models: Models, batch: int, progress: bool) -> int:
    from tqdm import tqdm

    for option, path in (("--vae", models.vae), ("--t5", models.t5), ("--clip", models.clip)):
        if not path.is_dir():
            raise FeaturesError(f"{option} {path}: no such folder")
    check_folders(models.vae, models.t5, models.clip)
    if batch < 1:
        raise FeaturesError(f"--batch {batch}: must be 1 or more")
    clips, texts, left_out = accepted_clips(folder)
    if left_out:
        print(f"{len(left_out)} accepted clip(s) lack a character or a motion and get no features: "
              + ", ".join(left_out[:5]) + (" ..." if len(left_out) > 5 else ""), file=sys.stderr)
    ids = models.identities()
    index = read_features_index(folder)
    check_done(folder, index, ids)
    todo = [c for c in clips if c.id not in index]
    first = 1 + max((int(Path(rel).stem.split("-")[1]) for rel in index.values()), default=-1)
    bar = tqdm(total=len(todo), desc="features", unit="clip", disable=not progress, dynamic_ncols=True)
    try:
        for n, shard in enumerate(batches(todo, SHARD_CLIPS), start=first):
            rel = shard_name(n)

            def step(phase: str, done: int, rel: str = rel) -> None:
                bar.set_postfix_str(f"{Path(rel).name}: {phase}", refresh=False)
                bar.update(done)

            tensors = shard_tensors(folder, shard, texts, models, batch, step)
            meta = {"format": FORMAT, "clips": [c.id for c in shard], "texts": {c.id: texts[c.id] for c in shard},
                    "models": ids}
            write_shard(folder / rel, tensors, meta)
            index.update({c.id: rel for c in shard})
            write_lines(folder / FEATURES_INDEX, [json.dumps(index, sort_keys=True, indent=1)])
    finally:
        bar.close()
    manifest = read_manifest(folder)
    write_manifest(folder, [replace(c, features=index.get(c.id)) for c in manifest])
    print(f"{folder / FEATURES_DIR}: features of {len(clips)} accepted clip(s) in "
          f"{len(set(index[c.id] for c in clips))} shard(s) ({len(todo)} computed now)")
    return 0


def compute(folder: Path, *, vae: Path, t5: Path, clip: Path, batch: int, progress: bool) -> int:
    """Compute (or continue computing) the accepted clips' features; 0 when done, 2 with a message
    on stderr when it cannot (a missing model folder, no accepted clips, an unreadable clip)."""
    try:
        return run(folder, Models(vae, t5, clip), batch, progress)
    except (FeaturesError, ModelFolderError) as e:
        print(f"animegamer film features: {e}", file=sys.stderr)
        return 2
