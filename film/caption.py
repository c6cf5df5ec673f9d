"""Captions and states: a local vision-language model describes each clip (`film prepare`'s caption stage).

The model sees the clip's 4 stills and one reference image per cast member and answers in tagged
fields (film.caption_parse has the tags and the strict parser; film.captioner_model the prompt and
the model). A clip whose answer parses and passes every check comes back `captioned` with its
fields filled; any other answer leaves it `needs_review` with `issue` saying exactly why and its
raw answer kept in the stage's file: nothing is guessed or filled in.

Resumable: one file per clip, `stages/caption/<clip id>.json` (the raw answer, the parse result,
the captioner's identity), written atomically once the answer is in; a rerun with the same
captioner reads the answered clips back instead of asking again, so it ends with the same clips.
A stored answer is parsed again at each run, against the cast of that run: an edited cast
re-checks every answer without asking the model again (delete `stages/caption` to ask it again
with the new reference images).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from film.cast import Cast
from film.manifest import Clip, write_lines

if TYPE_CHECKING:
    from film.captioner_model import Captioner

STAGE_DIR = Path("stages") / "caption"
NO_CAPTIONER = "no captioner ran (--captioner none, or no model configured): fill in the fields by hand"
SKIP_WORDS = ("", "none")  # a captioner argument meaning: caption nothing


def no_captioner(clips: list[Clip]) -> list[Clip]:
    """Every clip left for the review, saying no captioner ran (the fields stay empty)."""
    return [replace(c, status="needs_review", issue=NO_CAPTIONER) for c in clips]


def caption_stage(folder: Path, clips: list[Clip], cast: Cast, captioner: str | None, progress: bool) -> list[Clip]:
    """Caption `clips` (stills relative to `folder`) with the model folder `captioner`.

    None or "none": nothing runs, every clip is `needs_review`. Otherwise each clip's answer is
    parsed strictly: `captioned` with the fields, or `needs_review` with the reason. A folder that
    is not a model raises film.captioner_errors.CaptionerError (a message naming it, for the
    command to print) before any clip is touched."""
    if captioner is None or captioner.strip().casefold() in SKIP_WORDS:
        return no_captioner(clips)
    from film.captioner_errors import CaptionerError
    from film.captioner_model import identity, load_captioner  # transformers only when a model runs

    model_dir = Path(captioner).expanduser()
    if not (model_dir / "config.json").is_file():
        raise CaptionerError(f"captioner {model_dir}: not a model folder (no config.json); give a Qwen2-VL, "
                             "Qwen2.5-VL or InternVL folder in transformers' format, or --captioner none")
    loaded: list[Captioner] = []

    def answer(stills: list[Path], cast: Cast) -> str:  # the model loads at the first clip not yet answered
        if not loaded:
            loaded.append(load_captioner(model_dir))
        return loaded[0].answer(stills, cast)

    return run_stage(folder, clips, cast, identity(model_dir), answer, progress)


def default_captioner() -> str | None:
    """The configured captioner (ANIMEGAMER_CAPTIONER), for a command given no --captioner."""
    from settings import load_settings

    folder = load_settings().captioner
    return str(folder) if folder else None


def stage_file(folder: Path, clip_id: str) -> Path:
    return folder / STAGE_DIR / f"{clip_id}.json"


def run_stage(
    folder: Path,
    clips: list[Clip],
    cast: Cast,
    identity: str,
    answer: Callable[[list[Path], Cast], str],
    progress: bool,
) -> list[Clip]:
    """The stage around any answering function (the model's, or a test's canned answers)."""
    from tqdm import tqdm

    from film.caption_parse import parse_answer

    out: list[Clip] = []
    bar = tqdm(total=len(clips), desc="caption", unit="clip", disable=not progress, dynamic_ncols=True)
    try:
        for clip in clips:
            record = read_record(folder, clip.id, identity)
            if record is None:
                raw = answer([folder / s for s in clip.stills], cast)
                record = {"captioner": identity, "clip": clip.id, "answer": raw,
                          "parsed": parse_answer(raw, cast).to_json()}  # for a person reading the file
                write_lines(stage_file(folder, clip.id), [json.dumps(record, sort_keys=True, ensure_ascii=False)])
            out.append(apply(clip, parse_answer(record["answer"], cast).to_json()))
            bar.update(1)
    finally:
        bar.close()
    return out


def read_record(folder: Path, clip_id: str, identity: str) -> dict[str, Any] | None:
    """A clip's stored answer from this captioner (None: not answered yet, or by another model,
    or a file a crash left unreadable: it is asked again)."""
    path = stage_file(folder, clip_id)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or record.get("captioner") != identity or not isinstance(record.get("answer"), str):
        return None
    return record


def apply(clip: Clip, parsed: dict[str, Any]) -> Clip:
    """The clip with a parse result: its fields and `captioned`, or `needs_review` and the reason."""
    if parsed.get("problem"):
        return replace(clip, status="needs_review", issue=f"caption: {parsed['problem']}")
    return replace(clip, status="captioned", issue=None, **parsed["fields"])
