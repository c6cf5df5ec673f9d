"""The audit log as the moderation log channel reads it: the entries recorded (by any process)
as they commit, each with its server's log channel, as frozen values a face renders.

db.audit.record sends a NOTIFY (AUDIT_RECORDED) in the transaction that records the entry, so an
entry is heard at commit and one rolled back never is (service.events, AUDIT_RECORDED);
`to_post` reads what was heard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from db import audit, modlog
from db.models import AuditLog
from service.deps import Deps


@dataclass(frozen=True)
class AuditEntry:
    """An admin or moderator action (or a refused text) as recorded: its action's code, a target
    and details (ids, numbers, what people typed), never a sentence."""

    id: int
    guild_id: int
    channel_id: int | None
    actor_id: int
    actor_name: str
    action: str
    target: str | None
    details: dict
    created_at: datetime | None

    @classmethod
    def of(cls, row: AuditLog) -> AuditEntry:
        return cls(row.id, row.guild_id, row.channel_id, row.actor_id, row.actor_name, row.action, row.target,
                   row.details if isinstance(row.details, dict) else {}, row.created_at)


async def to_post(deps: Deps, audit_id: int) -> tuple[AuditEntry, int] | None:
    """Entry `audit_id` and its server's log channel; None when either is gone (no log channel)."""
    async with deps.sessions() as s:
        row = await audit.entry(s, audit_id)
        channel_id = None if row is None else await modlog.log_channel(s, row.guild_id)
        return None if row is None or channel_id is None else (AuditEntry.of(row), channel_id)

