"""The film's cast as the pipeline sees it: ids, names and one reference image each.

An operator writes it as TOML (`--characters FILE`):

    [[characters]]
    id = "qiqi"              # the id the game and the films file use
    name = "Qiqi"            # the name the instruction carries ("Character: Qiqi; ...")
    reference = "qiqi.png"   # an image of the character, relative to this file

`film prepare` copies it into the output folder (`cast.json` and `references/<id>.<ext>`), so the
review page, the features and training read the folder alone.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from game.film import CHARACTER_ID_RE, NAME_MAX
from game.sanitize import SPECIAL_TOKEN_RE

CAST_FILE = "cast.json"
REFERENCES = "references"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


class CastError(ValueError):
    """A cast file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    reference: Path  # absolute


@dataclass(frozen=True)
class Cast:
    members: tuple[Member, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.members)

    def get(self, character_id: str) -> Member | None:
        return next((m for m in self.members if m.id == character_id), None)

    def by_name(self, name: str) -> Member | None:
        """A member named as a captioner may write it (the id or the name, any case)."""
        key = " ".join(name.casefold().split())
        return next((m for m in self.members if key in (m.id, " ".join(m.name.casefold().split()))), None)


def _member(entry: object, n: int, base: Path, where: str) -> Member:
    if not isinstance(entry, dict):
        raise CastError(f"{where}: character {n} is not a table")
    cid, name, ref = entry.get("id"), entry.get("name"), entry.get("reference")
    if not isinstance(cid, str) or not CHARACTER_ID_RE.match(cid):
        raise CastError(f"{where}: character {n}: id {cid!r} must be 1-32 lowercase letters, digits, '-' or '_'")
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX or SPECIAL_TOKEN_RE.search(name):
        raise CastError(f"{where}: character {cid!r}: name must be 1-{NAME_MAX} characters without model tokens")
    if not isinstance(ref, str) or not ref:
        raise CastError(f"{where}: character {cid!r}: no reference image (reference = \"FILE\")")
    path = (base / ref).resolve()
    if not path.is_file():
        raise CastError(f"{where}: character {cid!r}: reference image {path} does not exist")
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise CastError(f"{where}: character {cid!r}: reference {path.name} is not a PNG, JPEG or WebP image")
    return Member(cid, name.strip(), path)


def load_cast(path: Path) -> Cast:
    """Read an operator's TOML cast file; every problem is a CastError naming the file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CastError(f"{path}: no such file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CastError(f"{path}: not a TOML file: {e}") from None
    entries = data.get("characters")
    if not isinstance(entries, list) or not entries:
        raise CastError(f"{path}: no [[characters]] entries")
    members = [_member(e, n, path.parent, str(path)) for n, e in enumerate(entries, 1)]
    seen: set[str] = set()
    for m in members:
        if m.id in seen:
            raise CastError(f"{path}: character id {m.id!r} appears twice")
        seen.add(m.id)
    return Cast(tuple(members))


def save_cast(cast: Cast, folder: Path) -> Cast:
    """Copy the cast into the output folder; returns it as the folder holds it."""
    refs = folder / REFERENCES
    refs.mkdir(parents=True, exist_ok=True)
    members = []
    for m in cast.members:
        target = refs / f"{m.id}{m.reference.suffix.lower()}"
        if m.reference.resolve() != target.resolve():
            shutil.copyfile(m.reference, target)
        members.append(Member(m.id, m.name, target.resolve()))
    data = [{"id": m.id, "name": m.name, "reference": f"{REFERENCES}/{m.reference.name}"} for m in members]
    (folder / CAST_FILE).write_text(json.dumps({"characters": data}, indent=1, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
    return Cast(tuple(members))


def read_cast(folder: Path) -> Cast:
    """The cast a prepared folder holds."""
    path = folder / CAST_FILE
    if not path.is_file():
        raise CastError(f"{folder}: no {CAST_FILE} (run `animegamer film prepare` with --characters first)")
    data = json.loads(path.read_text(encoding="utf-8"))
    return Cast(tuple(Member(e["id"], e["name"], (folder / e["reference"]).resolve()) for e in data["characters"]))
