"""The instruction text, exactly as the AnimeGamer model was trained on it.

`Character: {names}; Motion: {adverb} {motion}; Background: {time} {background}.`

(The released demo drops the adverb and time from history turns; we keep every turn in the
training format.)
"""

from __future__ import annotations

from dataclasses import dataclass

from game.catalogue import Film
from game.sanitize import InputRefused, field_label, sanitize_field, too_long
from game.texts import Later, listed
from i18n import L_, _
from settings.limits import FIELD_MAX, INSTRUCTION_LEN

# FIELD_MAX (one field's cap as typed, read here by film.manifest too) and the whole instruction's
# cap (`max_instruction_len`) are settings/limits.py's.
__all__ = ["FIELD_MAX", "Instruction", "build_instruction", "format_instruction"]


@dataclass(frozen=True)
class Instruction:
    characters: tuple[str, ...]  # display names, in the order given
    character_ids: tuple[str, ...]  # the same characters' catalogue ids
    motion: str
    adverb: str
    background: str
    time_of_day: str
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return format_instruction(self.characters, self.motion, self.adverb, self.background, self.time_of_day)

    @property
    def typed(self) -> tuple[str, ...]:
        """What the player typed, field by field (the characters come from the cast): what content
        rules check (game.content_rules), each field on its own so no phrase spans two."""
        return tuple(f for f in (self.motion, self.adverb, self.background, self.time_of_day) if f)


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def format_instruction(characters, motion: str, adverb: str, background: str, time_of_day: str) -> str:
    names = ", ".join(characters)
    return f"Character: {names}; Motion: {_join(adverb, motion)}; Background: {_join(time_of_day, background)}."


def build_instruction(
    film: Film,
    characters: list[str] | tuple[str, ...],
    motion: str,
    background: str,
    adverb: str = "",
    time_of_day: str = "",
    max_len: int = INSTRUCTION_LEN.default,
    playable: set[str] | None = None,
) -> Instruction:
    """Validate and assemble one turn's instruction.

    `characters` are character ids or names of `film`; `playable`, when given, is the set of ids
    enabled for this channel. Raises InputRefused with the reason.
    """
    if not characters:
        # TRANSLATORS: follows "list of characters" ("Your list of characters was refused: name at least ...").
        raise InputRefused("characters", L_("name at least one character in the shot"))
    names: list[str] = []
    ids: list[str] = []
    for key in characters:
        c = film.character(key)
        if c is None:
            # TRANSLATORS: %(name)s is the name as typed, quoted; %(film)s the film's title; %(known)s its characters.
            # (Names and title in the reader's language where the film has them.)
            raise InputRefused("characters", L_("%(name)s is not a character of %(film)s (known: %(known)s)",
                                                name=repr(key), film=Later(film.title_in),
                                                known=listed([Later(film.character_name_in, ch.id) for ch in film.characters])))
        if playable is not None and c.id not in playable:
            raise InputRefused("characters", L_("%(name)s is not playable in this channel",
                                                name=Later(film.character_name_in, c.id)))
        if c.id not in ids:
            ids.append(c.id)
            names.append(c.name)
    notes: list[str] = []
    cleaned = {}
    for name, value, required in (
        ("motion", motion, True),
        ("adverb", adverb, False),
        ("background", background, True),
        ("time_of_day", time_of_day, False),
    ):
        r = sanitize_field(value, name, FIELD_MAX[name], required=required)
        cleaned[name] = r.text
        # TRANSLATORS: what cleaning changed in one field: "motion: removed angle brackets".
        notes.extend(_("%(field)s: %(note)s", field=field_label(name), note=n) for n in r.notes)
    ins = Instruction(tuple(names), tuple(ids), cleaned["motion"], cleaned["adverb"], cleaned["background"], cleaned["time_of_day"], tuple(notes))
    if len(ins.text) > max_len:
        raise InputRefused("instruction", too_long(len(ins.text), max_len))
    return ins

