"""The training set's records: one clip per line of `DIR/manifest.jsonl`, and the review's edits.

Every stage of `animegamer film prepare` (cut, clip, motion, caption, features) writes its own
output under the folder; the manifest is assembled from them, then from the review's edits, which
`DIR/review.jsonl` keeps as an append-only log (one fsynced line per change, later lines win), so
a crash or a reload of the review page loses nothing. The same stage outputs give the same
manifest, byte for byte: records sorted by id, keys sorted, floats rounded, no timestamps.

A clip's status:
- `needs_review`: nobody has looked at it and its caption is missing or was not trusted
  (`issue` says why: no captioner, an answer that did not parse, a character outside the cast,
  reserved model tokens...);
- `captioned`: the captioner's answer parsed and passed every check; still unreviewed;
- `accepted` / `rejected`: an operator's decision on the review page.
Only `accepted` clips make games (film.games).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from game.instruction import FIELD_MAX
from game.sanitize import SPECIAL_TOKEN_RE

MANIFEST = "manifest.jsonl"
REVIEW_LOG = "review.jsonl"
SKIPPED = "skipped.jsonl"  # shots left out, each with its reason
GAMES = "games.jsonl"
FEATURES_INDEX = "features/index.json"  # {clip id: shard file relative to DIR}, written by film.features

STATUSES = ("needs_review", "captioned", "accepted", "rejected")
# The captioner's and the reviewer's fields, with the values each may hold.
TEXT_FIELDS = {"motion": FIELD_MAX["motion"], "adverb": FIELD_MAX["adverb"],
               "background": FIELD_MAX["background"], "time": FIELD_MAX["time_of_day"]}
STATE_VALUES = {"social": (0, 1), "entertainment": (0, 1), "stamina": (-1, 1)}
LEVELS = (1, 2, 3, 4, 5)
EDITABLE = ("status", "character", *TEXT_FIELDS, *STATE_VALUES, "caption_level")
FLOAT_DIGITS = 4


@dataclass(frozen=True)
class Clip:
    id: str  # "<source key>-<shot:04d>-<clip:02d>": stable for the same inputs
    source: str  # the source file as given on the command line
    shot: int  # the shot's index in its source
    start_s: float  # seconds in the source
    end_s: float
    clip: str  # the 17-frame, 480x720, 8 fps MP4, relative to DIR
    stills: tuple[str, ...]  # the frames the captioner sees (JPEG), relative to DIR
    motion_flow: float  # masked mean flow, pixels per frame at 480x720 and 8 fps (film.motion)
    motion_level: int  # 1-5, from motion_flow
    status: str = "needs_review"
    issue: str | None = None  # why a clip needs review (None once reviewed or trusted)
    character: str | None = None  # a cast member's id
    motion: str | None = None
    adverb: str | None = None
    background: str | None = None
    time: str | None = None
    social: int | None = None
    entertainment: int | None = None
    stamina: int | None = None
    caption_level: int | None = None  # the captioner's own motion level 1-5 (kept beside the measured one)
    features: str | None = None  # "<shard file>" holding this clip's precomputed tensors, relative to DIR
    extra: Mapping[str, Any] = field(default_factory=dict)  # stage-specific facts (documented where written)

    def to_json(self) -> str:
        data = asdict(self)
        data["stills"] = list(self.stills)
        for k, v in data.items():
            if isinstance(v, float):
                data[k] = round(v, FLOAT_DIGITS)
        return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Clip:
        data = json.loads(line)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown manifest fields: {', '.join(sorted(unknown))}")
        data["stills"] = tuple(data.get("stills") or ())
        return cls(**data)


def check_fields(changes: Mapping[str, Any], cast: Iterable[str]) -> list[str]:
    """What is wrong with a caption or an edit, as readable problems (empty: nothing). One rule
    for the captioner's parser and the review page: a cast member's id, text within the
    instruction's field caps and free of the model's reserved tokens, states and levels in range."""
    cast = set(cast)
    problems: list[str] = []
    for key, value in changes.items():
        if key not in EDITABLE:
            problems.append(f"{key}: not an editable field")
        elif value is None:
            continue
        elif key == "status":
            if value not in STATUSES:
                problems.append(f"status: {value!r} is not one of {', '.join(STATUSES)}")
        elif key == "character":
            if not isinstance(value, str) or value not in cast:
                problems.append(f"character: {value!r} is not in the cast ({', '.join(sorted(cast)) or 'empty'})")
        elif key in TEXT_FIELDS:
            if not isinstance(value, str):
                problems.append(f"{key}: not text")
            elif SPECIAL_TOKEN_RE.search(value):
                problems.append(f"{key}: holds a reserved model token")
            elif len(value) > TEXT_FIELDS[key]:
                problems.append(f"{key}: longer than {TEXT_FIELDS[key]} characters")
            elif key == "motion" and not value.strip():
                problems.append("motion: empty")
        elif key in STATE_VALUES:
            if type(value) is not int or value not in STATE_VALUES[key]:
                problems.append(f"{key}: {value!r} is not one of {STATE_VALUES[key]}")
        elif key == "caption_level" and (type(value) is not int or value not in LEVELS):
            problems.append(f"caption_level: {value!r} is not a level 1-5")
    return problems


def write_lines(path: Path, lines: Iterable[str]) -> None:
    """Replace a file atomically (a temporary file in the same folder, fsynced, renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_manifest(folder: Path, clips: Iterable[Clip]) -> None:
    write_lines(folder / MANIFEST, (c.to_json() for c in sorted(clips, key=lambda c: c.id)))


def read_manifest(folder: Path) -> list[Clip]:
    path = folder / MANIFEST
    out = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(Clip.from_json(line))
                except (ValueError, TypeError) as e:
                    raise ValueError(f"{path}:{n}: {e}") from None
    return out


def read_features_index(folder: Path) -> dict[str, str]:
    """Which shard holds each clip's precomputed features ({} before `film features` ran)."""
    path = folder / FEATURES_INDEX
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def append_review(folder: Path, clip_id: str, changes: Mapping[str, Any]) -> None:
    """Record one edit durably before it is acknowledged (a line, flushed and fsynced)."""
    line = json.dumps({"id": clip_id, **changes}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    path = folder / REVIEW_LOG
    with path.open("a+b") as f:
        # A crash mid-write can leave a torn last line: end it, so this edit stands on a line of its own.
        torn = False
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
        f.write((("\n" if torn else "") + line + "\n").encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def read_review(folder: Path) -> dict[str, dict[str, Any]]:
    """Each clip's edits, later lines winning; a torn last line (a crash mid-write) is ignored."""
    edits: dict[str, dict[str, Any]] = {}
    path = folder / REVIEW_LOG
    if not path.exists():
        return edits
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        clip_id = entry.pop("id", None)
        if isinstance(clip_id, str):
            edits.setdefault(clip_id, {}).update(entry)
    return edits


def with_review(clips: Iterable[Clip], edits: Mapping[str, Mapping[str, Any]]) -> list[Clip]:
    """The clips with the review's edits applied (a reviewed clip has no open issue)."""
    out = []
    for c in clips:
        e = edits.get(c.id)
        if e:
            c = replace(c, **{k: v for k, v in e.items() if k in EDITABLE})
            if c.status in ("accepted", "rejected"):
                c = replace(c, issue=None)
        out.append(c)
    return out
