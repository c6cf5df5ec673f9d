"""Table 1's metrics for one played turn, and their summaries over turns.

- CLIP-I: the mean, over the clip's sampled frames, of the cosine similarity between the frame's
  CLIP image embedding and the character's reference image's.
- DreamSim: the same frames against the reference, 1 - DreamSim's distance.
- CLIP-T: the sampled frames' image embeddings against the instruction's text embedding (the whole
  instruction as the model read it); CLIP-T^E: against the environment part alone (the instruction's
  Background: time and place, e.g. "night sky").
- ACC-F, MAE-F: the clip's motion as the film pipeline measures it (film.motion: masked DIS flow,
  the level nearest on a log scale) against the level the game asked; ACC-F 1 when equal, MAE-F
  the levels' absolute difference.
- ACC-S, MAE-S: the predicted state changes (social, entertainment, stamina) against the annotated
  ones: the share equal, and the mean absolute difference, over the three.
- seconds per turn: the backend's generate call (MLLM, decoder and MP4); peak GPU memory:
  torch.cuda.max_memory_allocated over the turn.

A metric whose model is missing has no value (None) and a reason; none is ever estimated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from evaluation.games_file import EvalTurn
from evaluation.scorers import ClipScorer, DreamSimScorer, Unavailable
from film.frames import decoded
from film.motion import level_of, measure_video

FRAMES_SAMPLED = 5  # evenly spaced, first and last included: 0, 4, 8, 12, 16 of a 17-frame clip

# key, label, better ("high" or "low"), how turns combine ("mean" or "max")
METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("clip_i", "CLIP-I", "high", "mean"),
    ("dreamsim", "DreamSim", "high", "mean"),
    ("clip_t", "CLIP-T", "high", "mean"),
    ("clip_t_e", "CLIP-T^E", "high", "mean"),
    ("acc_f", "ACC-F", "high", "mean"),
    ("mae_f", "MAE-F", "low", "mean"),
    ("acc_s", "ACC-S", "high", "mean"),
    ("mae_s", "MAE-S", "low", "mean"),
    ("seconds", "seconds per turn", "low", "mean"),
    ("peak_gpu_gib", "peak GPU memory (GiB)", "low", "max"),
)
KEYS = tuple(m[0] for m in METRICS)
LABELS = {m[0]: m[1] for m in METRICS}
BETTER = {m[0]: m[2] for m in METRICS}
COMBINE = {m[0]: m[3] for m in METRICS}
CLIP_KEYS = ("clip_i", "clip_t", "clip_t_e")
CPU_REASON = "not measured (CPU): no GPU ran the turns"


def sample_indices(n: int, k: int = FRAMES_SAMPLED) -> list[int]:
    return sorted({int(i) for i in np.linspace(0, n - 1, min(k, n)).round()})


def read_frames(path: Path) -> np.ndarray:
    """Every frame of an MP4 as RGB uint8 (T, H, W, 3), at its own size."""
    return np.stack([frame.to_ndarray(format="rgb24") for _t, frame in decoded(path)])


def read_image(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def motion_scores(measured_level: int, asked: int) -> tuple[float, float]:
    """(ACC-F, MAE-F) of one clip."""
    return float(measured_level == asked), float(abs(measured_level - asked))


def state_scores(predicted: tuple[int, ...] | list[int], annotated: tuple[int, ...] | list[int]) -> tuple[float, float]:
    """(ACC-S, MAE-S) of one turn: over its three state changes (social, entertainment, stamina)."""
    p, a = np.asarray(predicted, dtype=float), np.asarray(annotated, dtype=float)
    return float(np.mean(p == a)), float(np.mean(np.abs(p - a)))


def cosine_means(frames: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For unit-length frame embeddings (F, D) and targets (T, D): each target's mean cosine over the frames."""
    return (frames @ targets.T).mean(axis=0)


@dataclass
class Scorers:
    """The loaded metric models (or why each is missing), and the reference images' embeddings."""

    clip: ClipScorer | Unavailable
    dreamsim: DreamSimScorer | Unavailable
    _refs: dict[Path, np.ndarray] = field(default_factory=dict)
    _ref_emb: dict[Path, np.ndarray] = field(default_factory=dict)

    def identity(self) -> dict[str, str]:
        """What a turn's cached scores came from: recomputed when this changes."""
        def name(s):
            return f"not measured: {s.reason}" if isinstance(s, Unavailable) else str(s.folder)
        return {"clip": name(self.clip), "dreamsim": name(self.dreamsim)}

    def reference(self, path: Path) -> np.ndarray:
        if path not in self._refs:
            self._refs[path] = read_image(path)
        return self._refs[path]

    def reference_embedding(self, clip: ClipScorer, path: Path) -> np.ndarray:
        if path not in self._ref_emb:
            self._ref_emb[path] = clip.images([self.reference(path)])
        return self._ref_emb[path]


def appearance_scores(scorers: Scorers, frames: np.ndarray, reference: Path, turn: EvalTurn) -> dict[str, float]:
    """CLIP-I, CLIP-T, CLIP-T^E and DreamSim of the sampled frames, for the models that are there."""
    out: dict[str, float] = {}
    if isinstance(scorers.clip, ClipScorer):
        emb = scorers.clip.images(list(frames))
        out["clip_i"] = float(cosine_means(emb, scorers.reference_embedding(scorers.clip, reference))[0])
        out["clip_t"], out["clip_t_e"] = (float(v) for v in cosine_means(
            emb, scorers.clip.texts([turn.instruction, turn.environment])))
    if isinstance(scorers.dreamsim, DreamSimScorer):
        ref = scorers.reference(reference)
        out["dreamsim"] = float(np.mean([scorers.dreamsim.similarity(f, ref) for f in frames]))
    return out


def score_turn(clip_file: Path, record: dict, turn: EvalTurn, reference: Path, scorers: Scorers) -> dict:
    """One turn's values (None where not measured) and the measured motion."""
    frames = read_frames(clip_file)
    sampled = frames[sample_indices(len(frames))]
    values: dict[str, float | None] = dict.fromkeys(KEYS)
    values.update(appearance_scores(scorers, sampled, reference, turn))
    flow = measure_video(clip_file)
    level = level_of(flow)
    values["acc_f"], values["mae_f"] = motion_scores(level, turn.motion_level)
    values["acc_s"], values["mae_s"] = state_scores(record["predicted"][1:], turn.states)
    values["seconds"] = float(record["seconds"])
    peak = record.get("peak_gpu_bytes")
    values["peak_gpu_gib"] = None if peak is None else peak / 2**30
    return {"values": values, "motion_flow": flow, "measured_level": level, "frames": len(frames),
            "sampled": sample_indices(len(frames))}


def not_measured(scorers: Scorers, records: list[dict]) -> dict[str, str]:
    """Why each metric without values has none."""
    out: dict[str, str] = {}
    if isinstance(scorers.clip, Unavailable):
        out.update(dict.fromkeys(CLIP_KEYS, f"not measured: {scorers.clip.reason}"))
    if isinstance(scorers.dreamsim, Unavailable):
        out["dreamsim"] = f"not measured: {scorers.dreamsim.reason}"
    if all(r.get("peak_gpu_bytes") is None for r in records):
        out["peak_gpu_gib"] = CPU_REASON
    return out


def combine(key: str, values: list[float | None]) -> float | None:
    """Turns' values combined as the metric is (the mean; the peak memory's maximum); None if none."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return float(max(present)) if COMBINE[key] == "max" else float(np.mean(present))
