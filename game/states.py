"""Character-state arithmetic: stamina, social and entertainment, each 0..100.

The MLLM predicts four integers in -5..5 per turn: motion level, social, entertainment, stamina
(in that order, as in the prompt's `<ML>`, `<SC>`, `<ET>`, `<ST>` spans). Each unit of the three
state values moves a character's state by 5 points, clamped to 0..100; every state starts at 50.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from i18n import Lazy
from i18n.translate import Lp_

STATE_MIN, STATE_MAX, STATE_START = 0, 100, 50
UNIT = 5
PRED_MIN, PRED_MAX = -5, 5
STATE_NAMES = ("stamina", "social", "entertainment")
# The states as players read them (a post's bars, the status board), rendered where shown.
STATE_LABELS: dict[str, Lazy] = {
    "stamina": Lp_("character state", "Stamina"),
    "social": Lp_("character state", "Social"),
    "entertainment": Lp_("character state", "Entertainment"),
}


def state_label(name: str) -> str:
    """A state's name in the current locale ("Stamina")."""
    label = STATE_LABELS.get(name)
    return str(label) if label is not None else name.capitalize()


@dataclass(frozen=True)
class Prediction:
    """The four predicted values of one turn, each -5..5."""

    motion_level: int
    social: int
    entertainment: int
    stamina: int

    def __post_init__(self) -> None:
        for name, v in asdict(self).items():
            if not isinstance(v, int) or not PRED_MIN <= v <= PRED_MAX:
                raise ValueError(f"predicted {name} must be an integer in -5..5, got {v!r}")

    @classmethod
    def from_sequence(cls, values) -> Prediction:
        ml, sc, et, st = (int(v) for v in values)
        return cls(ml, sc, et, st)

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.motion_level, self.social, self.entertainment, self.stamina)


@dataclass(frozen=True)
class CharacterState:
    stamina: int = STATE_START
    social: int = STATE_START
    entertainment: int = STATE_START

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def clamp(v: int) -> int:
    return max(STATE_MIN, min(STATE_MAX, v))


def apply(state: CharacterState, pred: Prediction, unit: int = UNIT) -> CharacterState:
    return CharacterState(
        stamina=clamp(state.stamina + unit * pred.stamina),
        social=clamp(state.social + unit * pred.social),
        entertainment=clamp(state.entertainment + unit * pred.entertainment),
    )


def bar(value: int, width: int = 10) -> str:
    """A text bar such as `███████░░░` for 70."""
    filled = round(clamp(value) * width / STATE_MAX)
    return "█" * filled + "░" * (width - filled)


def describe(name: str, before: int | None, after: int) -> str:
    """`Stamina ███████░░░ 70 (+10)` (the name in the current locale); the change is omitted when unknown."""
    change = "" if before is None else f" ({after - before:+d})"
    return f"{state_label(name)} {bar(after)} {after}{change}"
