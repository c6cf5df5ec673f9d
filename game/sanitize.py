"""Player text to model-safe text.

Every field a player types (motion, adverb, background, time of day, free text) passes through
`sanitize_field` before it reaches the instruction. The rules, in order:

1. Unicode NFKC (full-width and compatibility forms fold to plain ones, so `＜ＴＵＲＮ＞` becomes
   `<TURN>` and is caught below).
2. Control and format characters are removed (C0/C1 controls, zero-width joiners and spaces,
   right-to-left overrides and other bidi controls, BOM); any whitespace run becomes one space.
3. The model's special tokens are removed: `<s>`, `</s>`, `<unk>`, `<frame_NNNNN>`, `<img>`,
   `</img>`, `<vid>`, `<frame>`, `<visual>`, `<ML>`, `<SC>`, `<ET>`, `<ST>`, `<TURN>` and their
   closing forms, `<Strength_k>`, and `[INST]`-style chat markers. Remaining `<` and `>` are
   removed too, so no added token can be formed from what is left.
4. Empty (or whitespace-only) text is refused; text longer than the cap is refused (never silently
   cut: the player decides what to drop).

SQL and Markdown are left as typed: queries are parameterised and the bot escapes Markdown and
disables mentions where it displays player text.

Free text that never reaches the model (display names, a pause reason, a cancel reason, audit
entries) goes through `clean_text`: the same steps 1 and 2, then a cap by cutting (such text is
not the typist's to shorten: a Discord display name is what Discord says). The database
services apply it to every such value they store, whichever face calls them, so a NUL or a lone
surrogate never reaches Postgres.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

SPECIAL_TOKEN_RE = re.compile(
    r"</?\s*(?:s|unk|pad|img|vid|frame|visual|ML|SC|ET|ST|TURN|frame_\d+|Strength_[+-]?\d+)\s*>"
    r"|\[/?INST\]",
    re.IGNORECASE,
)
_ANGLE_RE = re.compile(r"[<>]")
_SPACE_RE = re.compile(r"\s+")


class InputRefused(ValueError):
    """Player text that cannot be used; `reason` is shown to the player as is."""

    def __init__(self, field_name: str, reason: str):
        self.field_name = field_name
        self.reason = reason
        super().__init__(f"{field_name}: {reason}")


@dataclass(frozen=True)
class Sanitized:
    text: str
    notes: tuple[str, ...] = field(default=())  # what was changed, for telling the player


def _strip_invisible(text: str) -> tuple[str, int]:
    kept, dropped = [], 0
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "\t\n\r" or ch.isspace():
            kept.append(" ")
        elif cat in ("Cc", "Cf", "Cs", "Co", "Cn"):
            dropped += 1
        else:
            kept.append(ch)
    return "".join(kept), dropped


def clean_text(text: str | None, max_len: int) -> str:
    """Free text as stored: NFKC, invisible and control characters (NUL, lone surrogates, bidi
    controls, zero-width characters) removed, whitespace runs made one space, cut to `max_len`."""
    if not text:
        return ""
    s = unicodedata.normalize("NFKC", _drop_surrogates(text))
    s, _ = _strip_invisible(s)
    return _SPACE_RE.sub(" ", s).strip()[:max_len].rstrip()


def _drop_surrogates(text: str) -> str:
    # NFKC cannot take lone surrogates (they cannot be encoded); they carry nothing anyway.
    return text.encode("utf-8", "ignore").decode("utf-8") if any("\ud800" <= ch <= "\udfff" for ch in text) else text


def sanitize_field(text: str | None, field_name: str, max_len: int, required: bool = True) -> Sanitized:
    """Clean one field. Raises InputRefused with a reason a player can act on."""
    if text is None:
        text = ""
    notes: list[str] = []
    s = unicodedata.normalize("NFKC", _drop_surrogates(text))
    s, dropped = _strip_invisible(s)
    if dropped:
        notes.append(f"removed {dropped} invisible or control character(s)")
    s, n_special = SPECIAL_TOKEN_RE.subn(" ", s)
    if n_special:
        notes.append(f"removed {n_special} reserved model token(s)")
    s, n_angle = _ANGLE_RE.subn("", s)
    if n_angle:
        notes.append("removed angle brackets")
    s = _SPACE_RE.sub(" ", s).strip()
    if not s:
        if required:
            if text.strip():
                raise InputRefused(field_name, "nothing usable is left after removing reserved tokens and invisible characters")
            raise InputRefused(field_name, "is empty; please type something")
        return Sanitized("", tuple(notes))
    if len(s) > max_len:
        raise InputRefused(field_name, f"is too long ({len(s)} characters; at most {max_len})")
    return Sanitized(s, tuple(notes))
