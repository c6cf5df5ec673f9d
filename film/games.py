"""The training set's games: runs of consecutive accepted clips of one character, as the paper
trains on, cut into games of at most 5 turns, each `train` or `heldout`.

- Consecutive: clips of one source in time order; a clip that is not accepted, shows another
  character or lacks a field a turn needs ends the run.
- The split is chosen per source scene (a shot), deterministically: the first 8 bytes of
  sha256("<source key>/<shot>") read as a fraction below `heldout` make the shot held out. A run
  also ends where the split changes, so no training game shares a shot with a held-out one.
- A run of n clips makes games of 5 turns, the last one shorter (1-4): a trainer that wants the
  paper's 1-5-turn games equally weighted takes prefixes.

Each turn carries what training and evaluation read: the clip and its MP4, the instruction built
as the game builds it (game.instruction.format_instruction) from the cast member's name and the
clip's fields, those fields (motion, adverb, background, time), the measured motion level and the state
changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from film.atomic import read_json
from film.cast import CastError, read_cast
from film.manifest import GAMES, Clip, write_lines
from game.instruction import format_instruction

MAX_TURNS = 5
DEFAULT_HELDOUT = 0.1
SETTINGS = "settings.json"  # written by film.prepare; games read `heldout` from it
NEEDED = ("character", "motion", "background", "social", "entertainment", "stamina")


def source_key_of(clip: Clip) -> str:
    return clip.id.rsplit("-", 2)[0]


def split_of(key: str, shot: int, heldout: float) -> str:
    digest = hashlib.sha256(f"{key}/{shot}".encode()).digest()
    return "heldout" if int.from_bytes(digest[:8], "big") / 2**64 < heldout else "train"


def folder_heldout(folder: Path) -> float:
    settings = read_json(folder / SETTINGS) or {}
    value = settings.get("heldout", DEFAULT_HELDOUT)
    return float(value) if isinstance(value, int | float) else DEFAULT_HELDOUT


@dataclass(frozen=True)
class GamesSummary:
    train: int
    heldout: int
    turns: int
    incomplete: tuple[str, ...]  # accepted clips left out for a missing field


def _usable(c: Clip) -> bool:
    return c.status == "accepted" and all(getattr(c, f) is not None for f in NEEDED)


def _runs(clips: Iterable[Clip], heldout: float) -> list[tuple[str, list[Clip]]]:
    by_source: dict[str, list[Clip]] = {}
    for c in clips:
        by_source.setdefault(source_key_of(c), []).append(c)
    runs: list[tuple[str, list[Clip]]] = []
    for key, items in sorted(by_source.items()):
        items.sort(key=lambda c: (c.start_s, c.id))
        run: list[Clip] = []
        split = ""
        for c in items:
            s = split_of(key, c.shot, heldout)
            if not _usable(c) or (run and (c.character != run[-1].character or s != split)):
                if run:
                    runs.append((split, run))
                run = []
            if _usable(c):
                run.append(c)
                split = s
        if run:
            runs.append((split, run))
    return runs


def build_games(clips: list[Clip], names: dict[str, str], heldout: float) -> tuple[list[dict], GamesSummary]:
    games: list[dict] = []
    for split, run in _runs(clips, heldout):
        for i in range(0, len(run), MAX_TURNS):
            part = run[i:i + MAX_TURNS]
            games.append({
                "id": part[0].id, "split": split, "source": part[0].source, "character": part[0].character,
                "turns": [_turn(c, names) for c in part],
            })
    incomplete = tuple(c.id for c in clips if c.status == "accepted" and not _usable(c))
    summary = GamesSummary(sum(g["split"] == "train" for g in games), sum(g["split"] == "heldout" for g in games),
                           sum(len(g["turns"]) for g in games), incomplete)
    return games, summary


def _turn(c: Clip, names: dict[str, str]) -> dict:
    character = c.character or ""
    return {
        "clip": c.id, "video": c.clip, "shot": c.shot, "start_s": c.start_s, "end_s": c.end_s,
        "instruction": format_instruction([names.get(character, character)], c.motion or "", c.adverb or "",
                                          c.background or "", c.time or ""),
        # the fields as reviewed, so that readers (evaluation's CLIP-T^E) never parse them back
        "motion": c.motion or "", "adverb": c.adverb or "", "background": c.background or "", "time": c.time or "",
        "motion_level": c.motion_level, "motion_flow": c.motion_flow,
        "social": c.social, "entertainment": c.entertainment, "stamina": c.stamina,
    }


def games_for(folder: Path, clips: list[Clip], heldout: float | None = None) -> GamesSummary:
    """Write `DIR/games.jsonl` and say what it holds."""
    try:
        names = {m.id: m.name for m in read_cast(folder).members}
    except CastError:
        names = {}
    games, summary = build_games(clips, names, folder_heldout(folder) if heldout is None else heldout)
    write_lines(folder / GAMES, (json.dumps(g, sort_keys=True, ensure_ascii=False, separators=(",", ":")) for g in games))
    return summary


def write_games(folder: Path, clips: list[Clip], heldout: float | None = None) -> None:
    """`DIR/games.jsonl` from the clips (the review page calls it after every save). `heldout`:
    the held-out fraction, by default the one `film prepare` recorded in DIR/settings.json."""
    games_for(folder, clips, heldout)
