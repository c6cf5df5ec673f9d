"""One-time notices to a member (member_notices): a notice is shown the first time it applies to
them, never again, in any server. /privacy show counts the rows and /privacy delete removes them
(db/privacy.py)."""

from __future__ import annotations

from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from db.bounds import require_id
from db.models import MemberNotice

NOTICE_MAX = 32  # member_notices.notice


async def first_time(s: AsyncSession, user_id: int, notice: str) -> bool:
    """Record that `notice` is shown to the member; True only the first time (two concurrent
    callers: one gets True). The caller's transaction commits it."""
    require_id(user_id, "user id")
    if not 1 <= len(notice) <= NOTICE_MAX:
        raise ValueError(f"a notice's key is 1-{NOTICE_MAX} characters, got {notice!r}")
    q = (
        insert(MemberNotice)
        .values(user_id=user_id, notice=notice)
        .on_conflict_do_nothing(index_elements=[MemberNotice.user_id, MemberNotice.notice])
        .returning(MemberNotice.user_id)
    )
    return (await s.execute(q)).first() is not None
