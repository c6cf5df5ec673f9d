"""The prepared folder as the review page sees it: the clips with the review applied, the cast,
the vocabulary for autocomplete, the media it may serve, and the one way an edit is saved.

An edit is saved before it is acknowledged, in this order: a line appended to `review.jsonl`
(fsynced: from then on nothing is lost), the manifest rewritten atomically from the manifest and
the whole log, the games rebuilt from it (film.games.write_games). A clip is accepted only with
every field a game's turn needs (film.games.NEEDED), so no accepted clip is silently left out. A crash between two steps is mended on the next start
(the manifest is rebuilt from the log when they differ).
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from film.cast import Cast, read_cast
from film.games import NEEDED, write_games
from film.manifest import (
    EDITABLE,
    LEVELS,
    MANIFEST,
    REVIEW_LOG,
    STATUSES,
    TEXT_FIELDS,
    Clip,
    append_review,
    check_fields,
    read_manifest,
    read_review,
    with_review,
    write_manifest,
)
from game.catalogue import FILMS
from game.sanitize import clean_text

log = logging.getLogger(__name__)

SETTINGS_FILE = "settings.json"  # what `film prepare` was run with; its "film" names a catalogue film
MEDIA_TYPES = {".mp4": "video/mp4", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png",
               ".webp": "image/webp"}
REQUIRED_TO_ACCEPT = NEEDED  # what a game's turn needs (film.games leaves an accepted clip without them out)
FILM_SUGGESTIONS = {"motion": "motions", "adverb": "adverbs", "background": "backgrounds", "time": "times"}


class EditRefused(ValueError):
    """An edit that was not saved: each problem as {"field", "message"}."""

    def __init__(self, problems: list[dict[str, str]]):
        super().__init__("; ".join(p["message"] for p in problems))
        self.problems = problems


def _problem(message: str) -> dict[str, str]:
    # check_fields words every problem "<field>: <what is wrong>".
    name = message.split(":", 1)[0]
    return {"field": name if name in EDITABLE else "", "message": message}


def normalise(changes: Mapping[str, Any], cast: Cast) -> dict[str, Any]:
    """Text as the game stores free text (NFKC, no invisible or control characters, one space
    between words, game.sanitize.clean_text), never cut, so an overlong value is still refused;
    an emptied text field is None (cleared); a character named by its name is its id."""
    out: dict[str, Any] = {}
    for key, value in changes.items():
        if isinstance(value, str) and (key in TEXT_FIELDS or key == "character"):
            value = clean_text(value, 4 * len(value) + 16) or None
            member = cast.by_name(value) if key == "character" and value else None
            value = member.id if member else value
        out[key] = value
    return out


def film_id(folder: Path) -> str | None:
    """The catalogue film `settings.json` names, if any."""
    path = folder / SETTINGS_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("film") if path.is_file() else None
    except (OSError, ValueError, AttributeError) as e:
        log.warning("%s: not read (%s); suggestions come from the manifest only", path, e)
        return None
    return value if isinstance(value, str) and value else None


def film_suggestions(film: str | None) -> dict[str, tuple[str, ...]]:
    """The catalogue film's suggestions ({} without a film, or when the catalogue cannot be read
    or lacks it: the page then suggests what the manifest holds)."""
    if film is None:
        return {}
    try:
        found = FILMS.get(film)  # the first use loads the operator's catalogue through the settings
    except Exception as e:  # a broken settings or films file must not stop the review
        log.warning("the film catalogue could not be read (%s); suggestions come from the manifest only", e)
        return {}
    if found is None:
        log.warning("%s names film %r, which the catalogue does not have", SETTINGS_FILE, film)
        return {}
    return {key: tuple(getattr(found, attr)) for key, attr in FILM_SUGGESTIONS.items()}


def _rebuild_games(folder: Path, clips: list[Clip]) -> str:
    """games.jsonl from the saved review; a failure there is logged, the edit stays saved."""
    try:
        write_games(folder, clips)
    except Exception:
        log.exception("the review was saved, but rebuilding %s/games.jsonl failed", folder)
        return "failed"
    return "rebuilt"


def _end_torn_line(log_path: Path) -> None:
    """A crash mid-append leaves a last line without its newline; read_review ignores it, but the
    next append would join it and be lost too. Ending it keeps every later edit whole."""
    if not log_path.is_file() or log_path.stat().st_size == 0:
        return
    with log_path.open("rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) != b"\n":
            log.warning("%s: its last line was torn (a crash mid-write); it is ignored", log_path)
            f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())


class Folder:
    """One prepared folder under review. Not thread-safe: the server saves one edit at a time."""

    def __init__(self, folder: Path):
        self.path = folder.resolve()
        if not (self.path / MANIFEST).is_file():
            raise FileNotFoundError(f"{self.path}: no {MANIFEST} (run `animegamer film prepare ... --out {folder}` first)")
        self.cast: Cast = read_cast(self.path)
        _end_torn_line(self.path / REVIEW_LOG)
        stored = read_manifest(self.path)
        clips = with_review(stored, read_review(self.path))
        if clips != sorted(stored, key=lambda c: c.id):  # a crash after the log's line, before the rewrite
            log.info("%s: the manifest is behind review.jsonl; rewriting it", self.path)
            write_manifest(self.path, clips)
        self.clips: dict[str, Clip] = {c.id: c for c in sorted(clips, key=lambda c: c.id)}
        self.order = list(self.clips)
        self.film = film_id(self.path)
        self.suggestions = film_suggestions(self.film)
        self.media = self._media()

    def _media(self) -> dict[str, Path]:
        """The only files the page serves: each clip's MP4 and stills, the cast's references,
        by their path relative to the folder, if they lie inside it."""
        names = [p for c in self.clips.values() for p in (c.clip, *c.stills)]
        names += [m.reference.relative_to(self.path).as_posix() for m in self.cast.members
                  if m.reference.is_relative_to(self.path)]
        out = {}
        for name in names:
            path = (self.path / name).resolve()
            if path.is_relative_to(self.path) and path.suffix.lower() in MEDIA_TYPES:
                out[name] = path
        return out

    def reference(self, character: str | None) -> str | None:
        member = self.cast.get(character) if character else None
        if member is None or not member.reference.is_relative_to(self.path):
            return None
        return member.reference.relative_to(self.path).as_posix()

    def vocabulary(self) -> dict[str, list[str]]:
        """Per text field: the manifest's values, most used first, then the film's other suggestions."""
        out = {}
        for key in TEXT_FIELDS:
            used = Counter(v for c in self.clips.values() if isinstance(v := getattr(c, key), str) and v)
            ranked = [v for v, _n in sorted(used.items(), key=lambda kv: (-kv[1], kv[0].casefold()))]
            out[key] = ranked + [s for s in self.suggestions.get(key, ()) if s not in used]
        return out

    def select(self, status: str | None = None, character: str | None = None, level: int | None = None) -> list[Clip]:
        """The clips a filter shows, in id order. character "" means clips with no character yet."""
        out = []
        for cid in self.order:
            c = self.clips[cid]
            if status is not None and c.status != status:
                continue
            if character is not None and (c.character or "") != character:
                continue
            if level is not None and c.motion_level != level:
                continue
            out.append(c)
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        clips = self.clips.values()
        by_status = Counter(c.status for c in clips)
        by_character = Counter(c.character or "" for c in clips)
        by_level = Counter(c.motion_level for c in clips)
        return {"status": {"all": len(self.clips), **{s: by_status[s] for s in STATUSES}},
                "character": {**{m.id: by_character[m.id] for m in self.cast.members}, "": by_character[""]},
                "level": {str(n): by_level[n] for n in LEVELS}}

    def check(self, clip_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """The edit as it would be saved, or EditRefused with every problem (KeyError: no such clip)."""
        clip = self.clips[clip_id]
        if not changes:
            raise EditRefused([{"field": "", "message": "nothing to change"}])
        changes = normalise(changes, self.cast)
        # check_fields looks a character up in a set, which a list or an object cannot be
        odd = changes.get("character") is not None and not isinstance(changes["character"], str)
        problems = [{"field": "character", "message": "character: not text"}] if odd else []
        problems += [_problem(m) for m in check_fields({k: v for k, v in changes.items() if not (odd and k == "character")},
                                                       self.cast.ids)]
        if not problems and changes.get("status", clip.status) == "accepted":
            edited = replace(clip, **changes)
            missing = [k for k in REQUIRED_TO_ACCEPT if getattr(edited, k) is None]
            problems += [{"field": k, "message": f"{k}: needed for an accepted clip (a game's turn needs it)"} for k in missing]
        if problems:
            raise EditRefused(problems)
        return changes

    def save(self, clip_id: str, changes: Mapping[str, Any]) -> tuple[Clip, str]:
        """Check, log (fsynced), rewrite the manifest, rebuild the games. Blocking: run it in a
        thread, one at a time. Returns the clip as saved and what became of the games."""
        changes = self.check(clip_id, changes)
        append_review(self.path, clip_id, changes)
        clips = with_review(read_manifest(self.path), read_review(self.path))
        saved = next(c for c in clips if c.id == clip_id)
        if any(getattr(saved, k) != v for k, v in changes.items()):
            raise RuntimeError(f"{clip_id}: the edit was logged but does not read back from {REVIEW_LOG}")
        write_manifest(self.path, clips)
        self.clips = {c.id: c for c in clips}  # the same ids: self.order holds
        return self.clips[clip_id], _rebuild_games(self.path, clips)
