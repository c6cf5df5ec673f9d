"""The once-per-member English note (bot/answers/notices.py, service/notices.py over db/notices.py) on a
real Postgres."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select

from bot.answers.notices import ENGLISH_NOTE, english_client, english_note, needs_english_note
from db import notices
from db.models import MemberNotice
from game.catalogue import packaged_films
from i18n import use_locale

FILMS = packaged_films()
QIQI = FILMS["qiqi"]


async def _shown(s, user_id: int) -> list[str]:
    """The notices a member was shown, in the order they were (read from the table)."""
    q = select(MemberNotice.notice).where(MemberNotice.user_id == user_id).order_by(MemberNotice.shown_at, MemberNotice.notice)
    return list((await s.scalars(q)).all())


def _bot(sessions) -> Any:  # what english_note reads of the bot (its game service: bot.parts.service_args.deps_of)
    return SimpleNamespace(settings=None, db=SimpleNamespace(sessions=sessions), queue=None)


def _interaction(user_id: int, locale: str = "en-US") -> Any:  # and of the interaction
    return SimpleNamespace(user=SimpleNamespace(id=user_id), locale=locale)


@pytest.mark.parametrize(
    ("texts", "locale", "needed"),
    [
        (["fly on broomstick", "sky", "", None], "ja", False),  # suggestions: nothing to say
        (["  Fly On Broomstick ", "SKY"], "fr", False),  # a suggestion, however cased
        (["dance on the roof", "sky"], "en-US", False),  # English free text, English client
        (["dance on the roof", "sky"], "en-GB", False),
        (["屋根の上で踊る", "sky"], "en-US", True),  # another script (not a suggestion's Japanese name)
        (["ほうきで飛ぶ", "sky"], "en-US", False),  # a suggestion as the Japanese catalog shows it
        (["летит над городом", "sky"], "en-US", True),
        (["vole au-dessus de la forêt", "sky"], "en-US", True),  # an accented Latin letter
        (["dance on the roof", "sky"], "pt-BR", True),  # free text from a non-English client
        (["voa sobre a cidade"], "pt-BR", True),
    ],
)
def test_the_rule(texts, locale, needed):
    assert needs_english_note(texts, [QIQI], locale) is needed


def test_english_client():
    assert english_client("en-US") and english_client("en-GB") and english_client(None)
    assert not english_client("ja") and not english_client("es-419")


async def test_first_time_is_once_per_member_and_notice(sessions):
    async with sessions.begin() as s:
        assert await notices.first_time(s, 7, ENGLISH_NOTE) is True
        assert await notices.first_time(s, 7, ENGLISH_NOTE) is False
        assert await notices.first_time(s, 7, "another") is True
        assert await notices.first_time(s, 8, ENGLISH_NOTE) is True
    async with sessions() as s:
        assert sorted(await _shown(s, 7)) == ["another", ENGLISH_NOTE]  # one transaction: one shown_at
        assert await _shown(s, 8) == [ENGLISH_NOTE]


async def test_english_note_is_shown_once_per_member(sessions):
    bot = _bot(sessions)
    ja = _interaction(101, "ja")
    assert await english_note(bot, ja, ["fly on broomstick", "sky"], film=QIQI) is None  # suggestions only
    with use_locale("ja"):
        first = await english_note(bot, ja, ["ほうきで空を飛ぶ", "sky"], film=QIQI)
    assert first is not None and "英語" in first  # in the member's language (the ja catalog)
    assert await english_note(bot, ja, ["ほうきで空を飛ぶ", "sky"], film=QIQI) is None  # once
    assert await english_note(bot, ja, ["別の言葉"], film=QIQI) is None
    other = _interaction(102, "en-US")
    assert await english_note(bot, other, ["dance on the roof"]) is None  # English: never
    assert await english_note(bot, other, ["tanzt auf dem Dach über der Straße"]) is not None
    async with sessions() as s:
        assert await _shown(s, 101) == [ENGLISH_NOTE]
        assert await _shown(s, 102) == [ENGLISH_NOTE]
