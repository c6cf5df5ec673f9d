"""The length and count limits of a turn, in one table that every place enforcing them reads.

It sits in the bottom layer because the settings read it; nothing here imports the project.

- `SERVER_LIMITS`: each limit an operator sets (settings: default and bounds) and a server may
  tighten (/admin limits: the command's range; db.guilds: the range a server may store, then
  clamped to the operator's value).
- `FIELD_MAX`: one /act field as the member types it. The same number is the /act and /vote
  propose option's `max_length` (bot.answers.cogs), the page's `maxlength` (served in its state JSON), the
  sanitiser's cap (game.instruction), and the cap of a film's suggestions for that field
  (game.films_file), which Discord's autocomplete sends as the value. Discord counts what the
  member types, so the sanitiser measures the text as typed, before cleaning: a text Discord
  accepts is never refused as too long.
- `OTHERS_MAX`: /act's `with`, the other characters' names typed as one list (each name is then
  checked against the cast, and the whole instruction against `max_instruction_len`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

N = TypeVar("N", int, float)


@dataclass(frozen=True)
class Limit(Generic[N]):
    default: N
    low: N
    high: N


INSTRUCTION_LEN = Limit(300, 40, 2000)  # characters in a turn's whole instruction
COOLDOWN_SECONDS = Limit(15.0, 0.0, 3600.0)  # a player waits this long between turns
BACKLOG = Limit(5, 1, 100)  # queued and running turns per game

SERVER_LIMITS: dict[str, Limit] = {
    "max_instruction_len": INSTRUCTION_LEN,
    "cooldown_seconds": COOLDOWN_SECONDS,
    "backlog_cap": BACKLOG,
}

FIELD_MAX = {"motion": 80, "adverb": 30, "background": 80, "time_of_day": 30}
OTHERS_MAX = 200

# A film's suggestion list -> the /act field its terms fill.
SUGGESTION_FIELD = {"motions": "motion", "adverbs": "adverb", "backgrounds": "background", "times": "time_of_day"}
