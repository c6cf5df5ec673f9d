"""One-time notices in a member's answers: said once per member (service.notices remembers), in the
member's language.

The English note (`english_note`): the films' models were trained on English descriptions, so a
member whose instruction holds free text that is probably not English is told once that it is
sent as typed and that the suggestions give the most faithful shots.

The rule (`needs_english_note`), per text passed (the /act or /vote propose fields motion,
background, adverb and time of day, as typed; not the character names):
- an empty text, or one of the film's suggestions (in English, or as shown in the member's
  language or any shipped one: game.vocabulary, which maps it back to English), needs nothing;
- any other text needs the note when it holds a letter outside the English alphabet (A-Z):
  another script (かな, 漢字, 한글, кириллица) or an accented Latin letter (é, ñ, ü, ß, ç);
- or when the member's Discord client is not in English (`interaction.locale` not en-*): free
  text typed by a Brazilian, French or German member is most likely in their language even
  without accents.
So a member with an English client typing English free text never sees it; anyone else sees it
at most once, the first time it applies.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import discord

from bot.parts.service_args import deps_of
from game import vocabulary
from game.catalogue import FILMS, Film
from i18n import _
from service import notices

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

log = logging.getLogger(__name__)

ENGLISH_NOTE = "english-model"  # member_notices.notice


def _english_letters_only(text: str) -> bool:
    """Every letter is one of A-Z/a-z (digits, spaces and punctuation do not count)."""
    return all(("a" <= ch.casefold() <= "z") for ch in text if unicodedata.category(ch).startswith("L"))


def english_client(locale: object) -> bool:
    """A Discord locale (`en-US`, `en-GB`, a discord.Locale) in English; unknown counts as English."""
    raw = str(getattr(locale, "value", locale) or "en").strip().lower()
    return raw == "en" or raw.startswith(("en-", "en_"))


def needs_english_note(texts: Iterable[str | None], films: Iterable[Film], locale: object) -> bool:
    """Whether these instruction texts call for the English note (the module docstring's rule)."""
    films = list(films)
    for text in texts:
        t = (text or "").strip()
        if not t or vocabulary.is_term(t, films):
            continue
        if not _english_letters_only(t) or not english_client(locale):
            return True
    return False


def english_note_text() -> str:
    # TRANSLATORS: said once to a member who typed their own text (not a suggestion) in an
    # instruction, appended to the answer to /act or /vote propose.
    return _("Note: this film's model was trained on English descriptions. Your own words are sent as you typed them; "
             "the suggestions offered for each field give the most faithful shots.")


async def english_note(bot: AnimeGamerBot, interaction: discord.Interaction, texts: Sequence[str | None],
                       *, film: Film | None = None) -> str | None:
    """The English note in the current (member's) locale the first time it applies to this member,
    else None. `texts`: the instruction's fields as typed; `film`: the film played (default: every
    film's suggestions count). A database failure only loses the note (logged), never the answer."""
    films = [film] if film is not None else list(FILMS.values())
    if not needs_english_note(texts, films, getattr(interaction, "locale", None)):
        return None
    try:
        first = await notices.first_time(deps_of(bot), interaction.user.id, ENGLISH_NOTE)
    except Exception as e:  # best effort: the database being down loses the note, not the answer
        log.warning("recording the English note for member %s failed: %s", interaction.user.id, e)
        return None
    return english_note_text() if first else None
