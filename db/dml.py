"""The row count of an UPDATE or DELETE, typed.

AsyncSession.execute is annotated as returning a Result; for a DML statement without RETURNING
SQLAlchemy returns a CursorResult, which is what carries `rowcount`."""

from __future__ import annotations

from typing import cast

from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import UpdateBase


async def rowcount(s: AsyncSession, statement: UpdateBase) -> int:
    """Execute an UPDATE or DELETE in the session's transaction; the rows it matched."""
    result = cast(CursorResult, await s.execute(statement))
    return result.rowcount or 0
