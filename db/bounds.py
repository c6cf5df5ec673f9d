"""What fits the columns: every id is a Postgres bigint, turn numbers and limits are integers.

The services check numbers here before a query, so a hostile value (2**64 from a web request, a
custom id) is a clear refusal or "not found" rather than a database error. Free text is cleaned
with game.sanitize.clean_text, capped at the column's length.
"""

from __future__ import annotations

import math

from contracts.ids import BIGINT_MAX, INT_MAX
from game.errors import OutOfRange
from game.sanitize import clean_text
from i18n import N_

# Column lengths (db.models) of the free text the services store.
NAME_LEN = 100  # players.user_name, turns.author_name, audit_log.actor_name
TARGET_LEN = 200  # audit_log.target
REASON_LEN = 500  # a pause or cancel reason
ERROR_LEN = 2000  # turns.error
STAGE_LEN = 64  # turns.progress_stage


def fits_bigint(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -BIGINT_MAX - 1 <= value <= BIGINT_MAX


def fits_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -INT_MAX - 1 <= value <= INT_MAX


def require_id(value: object, what: str = "id") -> int:
    """An id to store: refused (OutOfRange) unless it fits a bigint."""
    if not fits_bigint(value):
        raise OutOfRange(what)
    return value  # type: ignore[return-value]


# TRANSLATORS: stored and shown instead of a display name made only of invisible characters.
SOMEONE = N_("someone")


def name_text(name: str | None, fallback: str = SOMEONE) -> str:
    """A display name as stored and shown; never empty (a name of invisible characters only: the
    fallback is stored in English, and shown translated where a display looks it up)."""
    return clean_text(name, NAME_LEN) or fallback


def free_text(text: str | None, max_len: int) -> str | None:
    """Optional free text (a reason, an error): cleaned and capped; None when nothing is left."""
    return clean_text(text, max_len) or None


def clean_json(value: object, max_len: int = TARGET_LEN, depth: int = 4) -> object:
    """Audit details: every string cleaned (JSON columns refuse NUL too), numbers out of range
    stored as text, nesting bounded."""
    if isinstance(value, str):
        return clean_text(value, max_len)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):  # JSON has no NaN or infinity
        return value if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return value if fits_bigint(value) else str(value)
    if depth <= 0:
        return str(value)[:max_len]
    if isinstance(value, dict):
        return {clean_text(str(k), 64): clean_json(v, max_len, depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [clean_json(v, max_len, depth - 1) for v in value]
    return clean_text(str(value), max_len)
