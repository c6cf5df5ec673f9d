"""The captioner's answer format and its strict parser.

An answer is nine tagged fields, each `<TAG>value</TAG>`, each exactly once, in any order:

    <S>subject: one cast member, by name or id</S>
    <MD>motion: what the subject does (a verb phrase)</MD>
    <MA>motion adverb: how (one word; may be empty)</MA>
    <EV>environment: the background (a word or two)</EV>
    <TD>time of day: e.g. morning, day, evening, night (may be empty)</TD>
    <SC>social: 1 if the subject interacts with someone, else 0</SC>
    <ET>entertainment: 1 if the subject is having fun, else 0</ET>
    <ST>stamina: -1 if the action tires the subject, +1 if it rests them</ST>
    <ML>motion level: 1 (still) to 5 (very fast)</ML>

The paper's tags (`<S>`, `<MD>`, `<MA>`, `<EV>`, `<SC>`, `<ET>`, `<ST>`, `<ML>`) plus `<TD>` for the
time of day, which the game's instruction carries ("Background: {time} {background}") and the
paper's list has no tag for. Text outside the tags (a model's preamble) is ignored unless it holds
a reserved model token. Every value is checked by film.manifest.check_fields, the rule the review
page applies to an operator's edits, and a text value must be one the game's cleaning of player
text leaves as it is (no control characters, no angle brackets). Any problem makes the whole answer untrusted: the parse
result names the first problem found and fills nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from film.cast import Cast
from film.manifest import check_fields
from game.sanitize import SPECIAL_TOKEN_RE, InputRefused, sanitize_field

# tag -> the Clip field it fills
TAGS: dict[str, str] = {
    "S": "character", "MD": "motion", "MA": "adverb", "EV": "background", "TD": "time",
    "SC": "social", "ET": "entertainment", "ST": "stamina", "ML": "caption_level",
}
GAME_FIELD = {"time": "time_of_day"}  # the game's name of a field, where it differs
OPTIONAL_TEXT = ("adverb", "time")  # may be empty: the game's instruction leaves them out then
INTEGERS = {"social": ("0", "1"), "entertainment": ("0", "1"), "stamina": ("-1", "+1", "1"),
            "caption_level": ("1", "2", "3", "4", "5")}
MARKER_RE = re.compile(r"<(/?)(" + "|".join(sorted(TAGS, key=len, reverse=True)) + r")>")


@dataclass(frozen=True)
class Parsed:
    fields: dict[str, Any] = field(default_factory=dict)  # Clip field -> value; empty on a problem
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"fields": self.fields, "problem": self.problem}


def _fail(problem: str) -> Parsed:
    return Parsed(problem=problem)


def split_tags(answer: str) -> tuple[dict[str, str], str] | str:
    """The tagged values and the text outside them, or what is wrong with the markup."""
    values: dict[str, str] = {}
    outside: list[str] = []
    pos = 0
    open_tag: tuple[str, int] | None = None
    for m in MARKER_RE.finditer(answer):
        closing, tag = m.group(1) == "/", m.group(2)
        if open_tag is None:
            if closing:
                return f"</{tag}> closes a tag that is not open"
            if tag in values:
                return f"tag <{tag}> appears more than once"
            outside.append(answer[pos:m.start()])
            open_tag = (tag, m.end())
        else:
            if not closing or tag != open_tag[0]:
                return f"<{open_tag[0]}> is not closed before <{m.group(1)}{tag}>"
            values[tag] = answer[open_tag[1]:m.start()]
            open_tag = None
        pos = m.end()
    if open_tag is not None:
        return f"<{open_tag[0]}> is not closed"
    outside.append(answer[pos:])
    return values, "".join(outside)


def _integer(key: str, text: str) -> int | str:
    if text not in INTEGERS[key]:
        return f"{key}: {text!r} is not one of {', '.join(INTEGERS[key])}"
    return int(text)


def _game_would_change(key: str, text: str) -> str | None:
    """What the game's own cleaning of a player's field (game.sanitize) would change in the text:
    a caption is trusted only as something a player could have typed (no control or invisible
    characters, no angle brackets, NFKC-normal), so training sees the text the game would send."""
    try:
        clean = sanitize_field(text, GAME_FIELD.get(key, key), len(text), required=False)
    except InputRefused as e:
        return f"{key}: {e.reason}"
    if clean.text != text:
        return f"{key}: {'; '.join(str(n) for n in clean.notes) or 'not in normal form (NFKC)'}"
    return None


def parse_answer(answer: str, cast: Cast) -> Parsed:
    """The fields of a valid answer, or the first problem (nothing is guessed)."""
    split = split_tags(answer)
    if isinstance(split, str):
        return _fail(split)
    values, outside = split
    missing = [t for t in TAGS if t not in values]
    if missing:
        return _fail("missing tag" + ("s " if len(missing) > 1 else " ") + ", ".join(f"<{t}>" for t in missing))
    if SPECIAL_TOKEN_RE.search(outside):
        return _fail("a reserved model token outside the tags")
    reserved = [f"<{t}>" for t in TAGS if SPECIAL_TOKEN_RE.search(values[t])]
    if reserved:
        return _fail(f"a reserved model token in {', '.join(reserved)}")
    out: dict[str, Any] = {}
    for tag, key in TAGS.items():
        text = " ".join(values[tag].split())
        if key == "character":
            if not text:
                return _fail("character: empty")
            member = cast.by_name(text)
            if member is None:
                return _fail(f"character: {text!r} is not in the cast ({', '.join(cast.ids)})")
            out[key] = member.id
        elif key in INTEGERS:
            value = _integer(key, text)
            if isinstance(value, str):
                return _fail(value)
            out[key] = value
        elif not text and key in OPTIONAL_TEXT:
            out[key] = None
        elif not text:
            return _fail(f"{key}: empty")
        else:
            changed = _game_would_change(key, text)
            if changed:
                return _fail(changed)
            out[key] = text
    problems = check_fields(out, cast.ids)
    if problems:
        return _fail("; ".join(problems))
    return Parsed(fields=out)
