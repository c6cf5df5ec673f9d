"""`animegamer film prepare`: video files to clips with measured motion and captions, then the
manifest and the games.

Stages, each one's output on disk under DIR/stages/ one unit of work a file, written whole
(temporary file, then rename) and skipped when already there, so a run stopped anywhere
(Ctrl-C, kill -9, a full disk) and run again continues and ends with the same manifest as a run
that was never stopped:
- cut:     stages/cut/<source key>.json           the shots of a source, each kept or skipped
- clips and motion, one pass: stages/clips/<source key>/<shot>.json  a shot's clips (MP4 in
  clips/, stills in stills/) and each one's motion_flow, measured on the frames as they are
  written (no second decode; and x264 with threads does not always give the same bytes, the
  frames do)
- caption: film.caption's own units
Then the folder's files are assembled from them: skipped.jsonl, manifest.jsonl (with the
review's edits and the features index applied) and games.jsonl.

A source that cannot be read is reported and left out; the others are still prepared, and the
exit status says something failed.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from film import clips as clipping
from film import cut, frames, motion
from film.atomic import read_json, write_json
from film.cast import Cast, load_cast, save_cast
from film.games import DEFAULT_HELDOUT, SETTINGS, games_for
from film.manifest import SKIPPED, Clip, read_features_index, read_review, with_review, write_lines, write_manifest

STAGES = "stages"
VERSION = 1  # of the stage outputs' layout and rules; a change makes old folders "different settings"


class PrepareError(Exception):
    """Something that stops the whole run (the message says what to do)."""


def stage_settings(detector: str) -> dict:
    """What the stage outputs depend on: a folder prepared with other values cannot be continued."""
    return {
        "version": VERSION, "detector": detector, "threshold": cut.THRESHOLD, "min_scene_len": cut.MIN_SCENE_LEN,
        "fps": frames.FPS, "frames": frames.CLIP_FRAMES, "size": [frames.HEIGHT, frames.WIDTH],
        "crf": clipping.CRF, "preset": clipping.PRESET, "motion": f"dis-fast, mask {motion.MASK_SHARE} of the peak",
    }


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        self.problems.append(text)
        print(f"animegamer film prepare: {text}", file=sys.stderr)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"animegamer film prepare: {text}", file=sys.stderr)


@contextmanager
def folder_lock(out: Path) -> Iterator[None]:
    with (out / ".lock").open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PrepareError(f"{out}: another `animegamer film prepare` is running on this folder") from None
        yield


def check_settings(out: Path, detector: str, captioner: str | None, heldout: float, film: str | None,
                   report: Report) -> None:
    path = out / SETTINGS
    old = read_json(path)
    new_stage = stage_settings(detector)
    if old is not None:
        differs = [f"{k}: {old.get('stages', {}).get(k)!r} then, {v!r} now" for k, v in new_stage.items()
                   if old.get("stages", {}).get(k) != v]
        if differs:
            raise PrepareError(
                f"{out} was prepared with other settings ({'; '.join(differs)}). Its clips would not match: "
                f"prepare into a new --out folder, or delete {out / STAGES} to start this one over.")
        for key, value in (("captioner", captioner), ("heldout", heldout), ("film", film)):
            if old.get(key) != value:
                report.note(f"{key} changed since the last run ({old.get(key)!r} -> {value!r})")
    write_json(path, {"stages": new_stage, "captioner": captioner, "heldout": heldout, "film": film})


def source_keys(videos: list[Path], report: Report) -> dict[str, Path]:
    keys: dict[str, Path] = {}
    for v in videos:
        key = clipping.source_key(v)
        if key in keys:
            report.problem(f"{v}: its clip ids would be the same as {keys[key]}'s ({key}-...): rename one of them")
            continue
        keys[key] = v
    return keys


def bar(total: float, desc: str, progress: bool, unit: str = "clip") -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, disable=not progress, file=sys.stderr, dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} {unit} [{elapsed}<{remaining}, {rate_fmt}]")


def cut_stage(out: Path, keys: dict[str, Path], detector: str, progress: bool, report: Report) -> dict[str, cut.Cuts]:
    done: dict[str, cut.Cuts] = {}
    todo: dict[str, Path] = {}
    for key, video in keys.items():
        data = read_json(out / STAGES / "cut" / f"{key}.json")
        if data is not None and data.get("source") == str(video) and video.is_file() \
                and data.get("size") == video.stat().st_size:
            done[key] = cut.Cuts.from_json(data)
        else:
            todo[key] = video
    durations: dict[str, float] = {}
    for key, video in list(todo.items()):
        try:
            durations[key] = frames.probe(video).duration_s
        except frames.VideoError as e:
            report.problem(str(e))
            del todo[key]
    with bar(sum(durations.values()), "cuts", progress, unit="s") as pb:

        def advance(seconds: float) -> None:
            pb.update(seconds)

        for key, video in todo.items():
            try:
                found = cut.find_cuts(video, str(video), detector, advance=advance)
            except frames.VideoError as e:
                report.problem(str(e))
                continue
            # New cuts (a new source, or another file under the same name): its old clips go.
            shutil.rmtree(out / STAGES / "clips" / key, ignore_errors=True)
            write_json(out / STAGES / "cut" / f"{key}.json", found.to_json())
            done[key] = found
            if found.duration_s < durations[key] - 1.0:
                report.problem(f"{video}: truncated? it ends at {found.duration_s:.1f} s of the {durations[key]:.1f} s "
                               "its header announces; the clips of what could be read are kept")
    for key, c in done.items():
        if not any(s.clips for s in c.shots):
            report.problem(f"{keys[key]}: no clip can be made from it (a clip needs {frames.CLIP_SECONDS:g} s of one "
                           f"shot; its {len(c.shots)} shot(s) are too short, black, faded or frozen)")
    return done


def _clips_unit(out: Path, key: str, shot: int) -> Path:
    return out / STAGES / "clips" / key / f"{shot:04d}.json"


def _unit_complete(out: Path, entries: list[dict]) -> bool:
    return all((out / e["clip"]).is_file() and all((out / s).is_file() for s in e["stills"]) for e in entries)


def clips_stage(out: Path, keys: dict[str, Path], cuts: dict[str, cut.Cuts], progress: bool, report: Report) -> None:
    plans: list[tuple[str, list[tuple[cut.Shot, list[float]]]]] = []
    total = 0
    for key, c in cuts.items():
        pending = []
        for s in c.shots:
            starts = clipping.clip_starts(s)
            known = read_json(_clips_unit(out, key, s.shot))
            if starts and (known is None or not _unit_complete(out, known)):
                pending.append((s, starts))
                total += len(starts)
        if pending:
            plans.append((key, pending))
    with bar(total, "clips and motion", progress) as pb:
        for key, pending in plans:
            c = cuts[key]
            spans = [(start, frames.CLIP_FRAMES) for _s, starts in pending for start in starts]
            owner = [(s, n, len(starts)) for s, starts in pending for n in range(len(starts))]
            entries: list[dict] = []
            try:
                for i, clip_frames in frames.sample_spans(keys[key], spans, c.origin, (c.width, c.height)):
                    s, n, count = owner[i]
                    cid = clipping.clip_id(key, s.shot, n)
                    rel, stills = clipping.write_clip(out, cid, clip_frames)
                    # Measured on the frames that went into the MP4: the same numbers on every run
                    # (x264 with threads now and then encodes a bit differently).
                    flow = motion.measure_frames(clip_frames)
                    entries.append({"id": cid, "start_s": spans[i][0], "end_s": spans[i][0] + frames.CLIP_SECONDS,
                                    "clip": rel, "stills": list(stills), "motion_flow": flow})
                    pb.update(1)
                    if n == count - 1:
                        write_json(_clips_unit(out, key, s.shot), entries)
                        entries = []
            except frames.VideoError as e:
                report.problem(f"{e}; the clips before it are kept")


def assemble_clips(out: Path, cuts: dict[str, cut.Cuts]) -> list[Clip]:
    result = []
    for key, c in sorted(cuts.items()):
        for s in c.shots:
            entries: list[dict] = read_json(_clips_unit(out, key, s.shot)) or []
            for e in entries:
                flow = e["motion_flow"]
                result.append(Clip(id=e["id"], source=c.source, shot=s.shot, start_s=e["start_s"], end_s=e["end_s"],
                                   clip=e["clip"], stills=tuple(e["stills"]), motion_flow=flow,
                                   motion_level=motion.level_of(flow)))
    return sorted(result, key=lambda c: c.id)


def write_skipped(out: Path, cuts: dict[str, cut.Cuts]) -> None:
    rows = [{"source": c.source, "shot": s.shot, "start_s": round(s.start_s, 4), "end_s": round(s.end_s, 4),
             "reason": s.skip} for _k, c in sorted(cuts.items()) for s in c.shots if s.skip]
    write_lines(out / SKIPPED, (json.dumps(r, sort_keys=True, separators=(",", ":")) for r in rows))


def check_characters(clips: list[Clip], cast: Cast, report: Report) -> list[Clip]:
    """A character the cast does not hold (a cast file edited since the review) sends its clip
    back to review rather than into a game."""
    out = []
    for c in clips:
        if c.character is not None and cast.get(c.character) is None:
            report.problem(f"{c.id}: character {c.character!r} is not in the cast ({', '.join(cast.ids)}); "
                           "the clip needs review again")
            c = replace(c, status="needs_review", issue=f"character {c.character!r} is not in the cast")
        out.append(c)
    return out


def finish(out: Path, clips: list[Clip], cast: Cast, report: Report) -> list[Clip]:
    """The manifest and the games from the clips: the review's edits and the features applied."""
    index = read_features_index(out)
    clips = [replace(c, features=index.get(c.id)) for c in with_review(clips, read_review(out))]
    clips = check_characters(clips, cast, report)
    write_manifest(out, clips)
    summary = games_for(out, clips)
    if summary.incomplete:
        report.note(f"{len(summary.incomplete)} accepted clip(s) lack a field a turn needs and make no game: "
                    + ", ".join(summary.incomplete[:5]) + (" ..." if len(summary.incomplete) > 5 else ""))
    return clips


def prepare(videos: list[Path], out: Path, characters: Path, *, film: str | None = None, captioner: str | None = None,
            heldout: float = DEFAULT_HELDOUT, detector: str = "content", progress: bool = True) -> int:
    """Run every stage; 0 when everything was prepared, 1 when some input failed (the rest is
    done), 2 when nothing could start. Messages go to stderr."""
    report = Report()
    if captioner is not None and captioner.strip().casefold() in ("", "none"):
        captioner = None  # the same as no captioner, also in settings.json
    if not 0.0 <= heldout < 1.0:
        raise PrepareError(f"--heldout {heldout}: must be at least 0 and below 1")
    cast = load_cast(characters)
    out.mkdir(parents=True, exist_ok=True)
    with folder_lock(out):
        check_settings(out, detector, captioner, heldout, film, report)
        cast = save_cast(cast, out)
        keys = source_keys(videos, report)
        cuts = cut_stage(out, keys, detector, progress, report)
        write_skipped(out, cuts)
        clips_stage(out, keys, cuts, progress, report)
        clips = assemble_clips(out, cuts)
        from film.caption import caption_stage

        clips = caption_stage(out, clips, cast, captioner, progress)
        clips = finish(out, clips, cast, report)
    counts = {s: sum(c.status == s for c in clips) for s in ("needs_review", "captioned", "accepted", "rejected")}
    skipped = sum(1 for c in cuts.values() for s in c.shots if s.skip)
    print(f"{out}: {len(clips)} clip(s) from {len(cuts)} source(s) ({', '.join(f'{n} {s}' for s, n in counts.items() if n)}); "
          f"{skipped} shot(s) skipped (skipped.jsonl)"
          + (f"; {len(report.problems)} problem(s) above" if report.problems else ""))
    return 1 if report.problems else 0
