"""Stored display names as readers see them.

In place of a member's name the code sometimes stores a stand-in, in English: "a player" (a name
the content rules refuse), "deleted member" (a member whose data was deleted), "someone" (no name
known). A stand-in is rendered in the reader's language where it is shown (a refusal, an embed);
any other name is shown as it was stored. Escaping for a face's markup stays in the face.
"""

from __future__ import annotations

from db.bounds import SOMEONE
from db.privacy import DELETED_NAME
from game.content_rules import NEUTRAL_NAME
from game.texts import catalog_text
from i18n import Lazy

STAND_INS = frozenset({NEUTRAL_NAME, DELETED_NAME, SOMEONE})


def shown_name(name: str) -> str | Lazy:
    """`name` as stored, or its stand-in's catalog message (rendered in the locale current where it
    is shown)."""
    return catalog_text(name) if name in STAND_INS else name
