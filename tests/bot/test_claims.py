"""The notifier claims only turns of its own guilds (the play page's local guild is not its own)."""

from __future__ import annotations

from db import turn_posts, turn_results
from testkit.queue import new_session, submit


async def test_claims_are_limited_to_the_bots_guilds(sessions):
    gs = await new_session(sessions, 300)  # guild 10
    turn = await submit(sessions, gs, enqueue=_no_job)
    async with sessions.begin() as s:
        await turn_results.start_turn(s, turn.id, 0)
        await turn_results.fail_turn(s, turn.id, "boom")
    async with sessions.begin() as s:
        assert await turn_posts.claim_unposted(s, "bot-a", guild_ids=[11, 12]) == []
        assert [t.id for t in await turn_posts.claim_unposted(s, "bot-b", guild_ids=[10])] == [turn.id]


async def _no_job(s, turn, gs):
    return None
