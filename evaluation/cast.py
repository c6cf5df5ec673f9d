"""Who the games play and what they should look like: each game's character checked against the
film's cast (the catalogue's, as the worker reads it), and one reference image per character.

References come from `--references DIR` (`DIR/<id>.png`, `.jpg`, `.jpeg` or `.webp`: the released
films have no pipeline folder) or, without it, from the film pipeline's folder that holds the games
file (`cast.json` and `references/<id>.*`, film/cast.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from evaluation.errors import EvalInputError
from evaluation.games_file import EvalGame
from film.cast import CAST_FILE, IMAGE_SUFFIXES, CastError, read_cast
from game.film import Film


@dataclass(frozen=True)
class Player:
    id: str
    name: str  # as the instruction and the backend's request carry it
    reference: Path


def _first_use(games: list[EvalGame], cid: str) -> int:
    return next(g.line for g in games if any(t.character == cid for t in g.turns))


def _in_folder(folder: Path, cid: str) -> Path | None:
    return next((folder / f"{cid}{s}" for s in IMAGE_SUFFIXES if (folder / f"{cid}{s}").is_file()), None)


def _pipeline_references(games_path: Path) -> dict[str, Path]:
    folder = games_path.parent
    if not (folder / CAST_FILE).is_file():
        raise EvalInputError(f"no reference images for {games_path}: give --references DIR holding <character id>.png "
                             f"per character, or evaluate a games file in its film folder (with {CAST_FILE})")
    try:
        return {m.id: m.reference for m in read_cast(folder).members}
    except (CastError, KeyError, ValueError) as e:
        raise EvalInputError(f"{folder / CAST_FILE}: cannot be read ({e})") from None


def players(film: Film, games: list[EvalGame], games_path: Path, references: Path | None) -> dict[str, Player]:
    """Every character the games play, with its name and reference image; EvalInputError naming the
    games file's line for a character outside the cast or without a readable reference."""
    if references is not None and not references.is_dir():
        raise EvalInputError(f"--references {references}: no such folder")
    known = {c.id: c.name for c in film.characters}
    found = None if references is not None else _pipeline_references(games_path)
    out: dict[str, Player] = {}
    for cid in dict.fromkeys(t.character for g in games for t in g.turns):
        where = f"{games_path}, line {_first_use(games, cid)}"
        if cid not in known:
            raise EvalInputError(f"{where}: character {cid!r} is not in the cast of {film.title} "
                                 f"(film {film.id}: {', '.join(known) or 'no characters'})")
        path = _in_folder(references, cid) if references is not None else (found or {}).get(cid)
        if path is None or not path.is_file():
            place = f"{references}/{cid}.png (or {', '.join(IMAGE_SUFFIXES[1:])})" if references is not None \
                else f"{games_path.parent / CAST_FILE}'s references"
            raise EvalInputError(f"{where}: no reference image of character {cid!r} in {place}")
        try:
            with Image.open(path) as im:
                im.verify()
        except (UnidentifiedImageError, OSError) as e:
            raise EvalInputError(f"{where}: reference image {path} of {cid!r} cannot be read ({e})") from None
        out[cid] = Player(cid, known[cid], path.resolve())
    return out
