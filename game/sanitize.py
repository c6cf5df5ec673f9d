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
   cut: the player decides what to drop). The cap counts the text as typed, before cleaning, as
   Discord's option `max_length` counts it (settings/limits.py): what Discord lets a member type
   is never refused as too long.

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

from i18n import L_, Lazy, _, ngettext
from i18n.translate import Ln_, Lp_

SPECIAL_TOKEN_RE = re.compile(
    r"</?\s*(?:s|unk|pad|img|vid|frame|visual|ML|SC|ET|ST|TURN|frame_\d+|Strength_[+-]?\d+)\s*>"
    r"|\[/?INST\]",
    re.IGNORECASE,
)
_ANGLE_RE = re.compile(r"[<>]")
_SPACE_RE = re.compile(r"\s+")


# What a player typed, by field, as refusals and notes name it ("Your list of characters was refused").
FIELD_LABELS: dict[str, Lazy] = {
    "motion": Lp_("field", "motion"),
    "adverb": Lp_("field", "adverb"),
    "background": Lp_("field", "background"),
    "time_of_day": Lp_("field", "time of day"),
    "characters": Lp_("field", "list of characters"),
    "instruction": Lp_("field", "instruction"),
    "name": Lp_("field", "name"),
    "reason": Lp_("field", "reason"),
    "term": Lp_("field", "term"),
}


def field_label(field_name: str) -> str:
    """A field's name as the player reads it, in the current locale (`time_of_day` -> "time of day")."""
    label = FIELD_LABELS.get(field_name)
    return str(label) if label is not None else field_name.replace("_", " ")


class InputRefused(ValueError):
    """Player text that cannot be used. `field_name` is the field's key (the play page's `field`);
    `reason` is shown to the player, rendered in the locale current where it is read (the refusal
    is a lazy catalog message, `lazy_reason`), worded to follow the field's name:
    "motion: is empty; please type something"."""

    def __init__(self, field_name: str, reason: str | Lazy):
        self.field_name = field_name
        self.lazy_reason = reason
        super().__init__(field_name, reason)

    @property
    def reason(self) -> str:
        return str(self.lazy_reason)

    def __str__(self) -> str:
        # TRANSLATORS: a refused field and why: "motion: is empty; please type something".
        return _("%(field)s: %(reason)s", field=field_label(self.field_name), reason=self.lazy_reason)


def too_long(length: int, max_len: int) -> Lazy:
    """The refusal of text over its cap, worded to follow the field's name."""
    # TRANSLATORS: follows a field's name ("motion: is too long (81 characters; at most 80)").
    return Ln_("is too long (%(n)s character; at most %(max)s)", "is too long (%(n)s characters; at most %(max)s)",
               length, max=max_len)


@dataclass(frozen=True)
class Sanitized:
    text: str
    # What was changed, for telling the player: rendered in the locale current when it was cleaned
    # (the member's or the page's, who is told at once).
    notes: tuple[str, ...] = field(default=())


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
    if len(text) > max_len:  # as typed: the cap Discord and the page hold the member to
        raise InputRefused(field_name, too_long(len(text), max_len))
    notes: list[str] = []
    s = unicodedata.normalize("NFKC", _drop_surrogates(text))
    s, dropped = _strip_invisible(s)
    if dropped:
        # TRANSLATORS: what cleaning changed in a field, shown after its name ("motion: removed 2 ...").
        notes.append(ngettext("removed %(n)s invisible or control character", "removed %(n)s invisible or control characters",
                              dropped))
    s, n_special = SPECIAL_TOKEN_RE.subn(" ", s)
    if n_special:
        notes.append(ngettext("removed %(n)s reserved model token", "removed %(n)s reserved model tokens", n_special))
    s, n_angle = _ANGLE_RE.subn("", s)
    if n_angle:
        notes.append(_("removed angle brackets"))
    s = _SPACE_RE.sub(" ", s).strip()
    if not s:
        if required:
            if text.strip():
                # TRANSLATORS: follows a field's name ("motion: nothing usable is left ...").
                raise InputRefused(field_name, L_("nothing usable is left after removing reserved tokens and invisible characters"))
            # TRANSLATORS: follows a field's name ("motion: is empty; please type something").
            raise InputRefused(field_name, L_("is empty; please type something"))
        return Sanitized("", tuple(notes))
    return Sanitized(s, tuple(notes))
