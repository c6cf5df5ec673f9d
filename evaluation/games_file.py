"""The games an evaluation plays: the film pipeline's `games.jsonl` (film/games.py writes it) or a
hand-written file of the same form, one game per line:

    {"id": "g1", "character": "qiqi", "split": "heldout",
     "turns": [{"instruction": "Character: Qiqi; Motion: quickly fly; Background: night sky.",
                "motion_level": 4, "social": 0, "entertainment": 1, "stamina": -1}, ...]}

`split` may be left out (the game counts as held out); `id` too (then `line<N>`). A turn may carry
its fields as typed (`motion`, `adverb`, `background`, `time`); otherwise they are read back from the
instruction, whose form is the game's (`Character: ...; Motion: ...; Background: ...`). Every
problem is a GamesFileError naming the file and the line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from evaluation.errors import EvalInputError
from game.sanitize import SPECIAL_TOKEN_RE
from game.states import PRED_MAX, PRED_MIN

SPLITS = ("heldout", "train", "all")
STATES = ("social", "entertainment", "stamina")
INSTRUCTION_RE = re.compile(r"^Character: (?P<names>.+?); Motion: (?P<motion>.*?); Background: (?P<background>.*?)\.?$")
# Read back from the Background part when a turn does not name its time: format_instruction puts it first.
TIMES = ("day", "night", "morning", "evening", "sunset", "noon", "afternoon", "dawn", "dusk", "midnight")


class GamesFileError(EvalInputError):
    """A games file that cannot be evaluated; the message names the file and the line."""


@dataclass(frozen=True)
class EvalTurn:
    index: int  # 0-based, within its game
    instruction: str  # exactly as the model reads it
    character: str  # a cast member's id
    motion: str
    adverb: str
    background: str
    time: str
    motion_level: int  # the level asked (the source clip's measured level)
    social: int  # the annotated state changes
    entertainment: int
    stamina: int

    @property
    def environment(self) -> str:
        """The instruction's environment part, as CLIP-T^E reads it: its Background, time first."""
        return " ".join(p for p in (self.time, self.background) if p)

    @property
    def states(self) -> tuple[int, int, int]:
        return (self.social, self.entertainment, self.stamina)


@dataclass(frozen=True)
class EvalGame:
    id: str
    character: str
    split: str
    line: int  # where it is in the file (1-based)
    turns: tuple[EvalTurn, ...]


def split_motion(text: str) -> tuple[str, str]:
    """(adverb, motion) of an instruction's Motion part: format_instruction writes the adverb first,
    so a leading word in -ly followed by more words is read as the adverb."""
    words = text.split()
    if len(words) > 1 and words[0].casefold().endswith("ly"):
        return words[0], " ".join(words[1:])
    return "", text.strip()


def split_background(text: str) -> tuple[str, str]:
    """(time, background) of an instruction's Background part (a known time word first)."""
    words = text.split()
    if len(words) > 1 and words[0].casefold() in TIMES:
        return words[0], " ".join(words[1:])
    return "", text.strip()


def _int_in(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _turn(data: object, index: int, character: str, where: str) -> EvalTurn:
    at = f"{where}, turn {index + 1}"
    if not isinstance(data, dict):
        raise GamesFileError(f"{at}: not an object")
    text = data.get("instruction")
    if not isinstance(text, str) or not text.strip():
        raise GamesFileError(f"{at}: no instruction text (\"instruction\": \"Character: ...; Motion: ...; Background: ...\")")
    if SPECIAL_TOKEN_RE.search(text):
        raise GamesFileError(f"{at}: the instruction holds a reserved model token")
    m = INSTRUCTION_RE.match(text.strip())
    if m is None:
        raise GamesFileError(f"{at}: the instruction {text!r} is not in the game's form "
                             "'Character: NAME; Motion: MOTION; Background: BACKGROUND.'")
    adverb, motion = split_motion(m["motion"])
    time, background = split_background(m["background"])
    fields = {"motion": motion, "adverb": adverb, "background": background, "time": time}
    for key in fields:
        if key in data:
            if not isinstance(data[key], str):
                raise GamesFileError(f"{at}: {key} is not text")
            fields[key] = data[key]
    if not _int_in(data.get("motion_level"), 1, 5):
        raise GamesFileError(f"{at}: motion_level must be a whole number 1-5, got {data.get('motion_level')!r}")
    for key in STATES:
        if not _int_in(data.get(key), PRED_MIN, PRED_MAX):
            raise GamesFileError(f"{at}: {key} must be a whole number {PRED_MIN}..{PRED_MAX}, got {data.get(key)!r}")
    own = data.get("character", character)
    if not isinstance(own, str) or not own:
        raise GamesFileError(f"{at}: character is not a cast member's id")
    return EvalTurn(index, text.strip(), own, fields["motion"], fields["adverb"], fields["background"], fields["time"],
                    data["motion_level"], data["social"], data["entertainment"], data["stamina"])


def _game(data: object, n: int, path: Path) -> EvalGame:
    where = f"{path}, line {n}"
    if not isinstance(data, dict):
        raise GamesFileError(f"{where}: a game is a JSON object, not {type(data).__name__}")
    gid = data.get("id", f"line{n}")
    if not isinstance(gid, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", gid):
        raise GamesFileError(f"{where}: id {gid!r} must be 1-100 letters, digits, '.', '_' or '-'")
    character = data.get("character")
    if not isinstance(character, str) or not character:
        raise GamesFileError(f"{where}: no character (\"character\": a cast member's id)")
    split = data.get("split", "heldout")
    if split not in ("heldout", "train"):
        raise GamesFileError(f"{where}: split {split!r} is not 'heldout' or 'train'")
    turns = data.get("turns")
    if not isinstance(turns, list) or not turns:
        raise GamesFileError(f"{where}: no turns (\"turns\": [{{\"instruction\": ..., ...}}, ...])")
    return EvalGame(gid, character, split, n, tuple(_turn(t, i, character, where) for i, t in enumerate(turns)))


def read_games(path: Path, split: str = "heldout") -> list[EvalGame]:
    """The games of `path` to play: those of `split` (heldout, train or all), in file order."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise GamesFileError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise GamesFileError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise GamesFileError(f"{path}: cannot be read ({e.strerror or e})") from None
    games: list[EvalGame] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            raise GamesFileError(f"{path}, line {n}: not JSON ({e.msg}, column {e.colno})") from None
        game = _game(data, n, path)
        if game.id in seen:
            raise GamesFileError(f"{path}, line {n}: game id {game.id!r} is already used on line {seen[game.id]}")
        seen[game.id] = n
        games.append(game)
    if not games:
        raise GamesFileError(f"{path}: holds no games")
    chosen = [g for g in games if split == "all" or g.split == split]
    if not chosen:
        counts = {s: sum(g.split == s for g in games) for s in ("heldout", "train")}
        raise GamesFileError(f"{path}: no {split} games ({counts['heldout']} held out, {counts['train']} train); "
                             "choose another with --split")
    return chosen
