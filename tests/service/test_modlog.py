"""What the moderation log reads through the service (service.modlog), against a real Postgres:
an entry is heard when its transaction commits and never when it is rolled back, and it reaches a
face as a frozen value with its server's log channel, or not at all without one."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from service import admin, events, modlog
from service.deps import Member, Place

HERE = Place(100, 200)
MOD = Member(9, "mod")


async def test_an_entry_is_heard_at_commit_and_read_with_its_log_channel(deps, database_url):
    connected = asyncio.Event()

    async def on_connect() -> None:
        connected.set()

    async with events.Events(database_url, [events.AUDIT_RECORDED], on_connect=on_connect) as heard:
        await asyncio.wait_for(connected.wait(), 10)
        with pytest.raises(RuntimeError):  # rolled back: never heard
            async with deps.sessions.begin() as s:
                await deps.record(s, HERE, MOD, "rolled_back")
                raise RuntimeError("the action failed")
        await admin.set_previews(deps, HERE, MOD, True)  # an audited action
        payload = (await asyncio.wait_for(anext(aiter(heard)), 10)).payload
    assert payload["guild_id"] == HERE.guild_id

    assert await modlog.to_post(deps, payload["audit_id"]) is None  # the server has no log channel yet
    await admin.set_log_channel(deps, HERE, MOD, 555)
    found = await modlog.to_post(deps, payload["audit_id"])
    assert found is not None
    entry, channel_id = found
    assert channel_id == 555
    assert (entry.id, entry.guild_id, entry.channel_id, entry.actor_id, entry.actor_name, entry.action, entry.target) == (
        payload["audit_id"], HERE.guild_id, HERE.channel_id, MOD.id, "mod", "previews", "on")
    assert entry.created_at is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.action = "other"  # type: ignore[misc]
    assert await modlog.to_post(deps, 10**12) is None  # no such entry
