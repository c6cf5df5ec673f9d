"""What a bot process does on its own touches only its shards' servers (bot.shards_claim): the
claim-filtered queries (idle and withdrawn sessions, blob pruning, servers that removed the bot,
due deletions) against a real Postgres, and the status board leaving another shard's progress alone.
The same with real bots on the fake Discord: tests/bot/test_two_shards.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
from sqlalchemy import func, insert, select, update

from bot.parts import locale
from bot.parts.service_args import service_on
from bot.parts.shards import ShardClaim, shard_of
from bot.parts.status import StatusBoard
from contracts.turn import TurnResult
from db import departures, turn_posts, turn_results
from db import sessions as gsess
from db.claims import claimed, narrows
from db.guilds import Limits
from db.models import AuditLog, GameSession, GuildDeparture, Turn
from game import stored_reasons
from game.catalogue import FILMS
from game.instruction import build_instruction
from game.states import Prediction
from service import turn_queue as turns
from service.jobs import StoredJobs
from testkit.queue import ready_made
from testkit.waits import wait_for

QIQI = FILMS["qiqi"]
# Two servers on each shard of two (a server's shard: (id >> 22) % 2), all real Discord ids.
ZERO = [(1000 << 22) + 7, (1002 << 22) + 9]
ONE = [(1001 << 22) + 7, (1003 << 22) + 9]
SHARD0, SHARD1, ALL = ShardClaim.of([0], 2), ShardClaim.of([1], 2), ShardClaim.of([0, 1], 2)


def test_the_servers_are_on_the_shards_they_claim():
    assert [shard_of(g, 2) for g in ZERO + ONE] == [0, 0, 1, 1]
    assert narrows(SHARD0) and not narrows(ALL) and not narrows(ShardClaim()) and not narrows(None)


async def _sessions(sessions) -> dict[int, GameSession]:
    """A game in one channel of each server, alice playing Qiqi."""
    games = {}
    async with sessions.begin() as s:
        for n, guild_id in enumerate(ZERO + ONE):
            gs = await gsess.start_session(s, guild_id, guild_id + 100 + n, QIQI, created_by=1)
            await gsess.join(s, gs, QIQI, 1, "alice", "qiqi")
            games[guild_id] = gs
    return games


async def test_idle_and_withdrawn_sessions_of_the_claim_only(sessions):
    games = await _sessions(sessions)
    async with sessions.begin() as s:
        await s.execute(update(GameSession).values(last_activity_at=func.now() - timedelta(hours=3)))
    idle = timedelta(hours=2)
    async with sessions() as s:
        assert {gs.guild_id for gs in await gsess.idle_sessions(s, idle, SHARD0)} == set(ZERO)
        assert {gs.guild_id for gs in await gsess.idle_sessions(s, idle, SHARD1)} == set(ONE)
        everyone = {gs.guild_id for gs in await gsess.idle_sessions(s, idle)}
        assert everyone == {gs.guild_id for gs in await gsess.idle_sessions(s, idle, ALL)} == set(ZERO + ONE)
        # Qiqi withdrawn from the catalogue: each process finds its own servers' sessions.
        assert {gs.guild_id for gs in await gsess.withdrawn_sessions(s, set(), SHARD1)} == set(ONE)
        assert {gs.guild_id for gs in await gsess.withdrawn_sessions(s, set(), SHARD0)} == set(ZERO)
        assert len(await gsess.withdrawn_sessions(s, set())) == 4
        await s.rollback()

    # Shard 1's process is down: shard 0's locks and pauses its own, and shard 1's wait.
    async with sessions.begin() as s:
        for gs in await gsess.idle_sessions(s, idle, SHARD0):
            await gsess.set_paused(s, gs, True, stored_reasons.IDLE)
    async with sessions() as s:
        status = dict((await s.execute(select(GameSession.guild_id, GameSession.status))).all())
    assert status == {**dict.fromkeys(ZERO, "paused"), **dict.fromkeys(ONE, "active")}
    assert set(games) == set(status)


def _result() -> TurnResult:
    return TurnResult(
        prediction=Prediction(3, 1, 2, -1), motion_scope=10.0, mp4=b"\x00\x00\x00\x18ftypmp42",
        representation=np.ones((226, 1920), np.float32) * 0.5, timings={"mllm": 0.1},
    )


async def test_prune_blobs_of_the_claim_only(sessions):
    games = await _sessions(sessions)
    limits = Limits(max_instruction_len=300, cooldown_seconds=0, backlog_cap=20)
    for gs in games.values():
        for _ in range(7):  # 7 turns each: the first of each session may go (the last 6 are context)
            async with sessions.begin() as s:
                fresh = await s.get(GameSession, gs.id)
                assert fresh is not None
                ins = build_instruction(QIQI, ["qiqi"], "walk", "town", "", "")
                t, _made = await turns.submit_turn(s, fresh, 1, ready_made("alice", ins), limits=limits, enqueue=None)
            async with sessions.begin() as s:
                assert await turn_results.start_turn(s, t.id, 2) is not None
            async with sessions.begin() as s:
                assert await turn_results.complete_turn(s, t.id, _result(), "test")
    async with sessions.begin() as s:
        await s.execute(update(Turn).values(posted_at=func.now(), finished_at=func.now() - timedelta(days=40)))

    async def pruned() -> set[int]:
        async with sessions() as s:
            q = select(GameSession.guild_id).join(Turn, Turn.session_id == GameSession.id).where(Turn.blobs_pruned_at.is_not(None))
            return set((await s.scalars(q)).all())

    async with sessions.begin() as s:
        assert await turn_posts.prune_blobs(s, timedelta(days=30), claim=SHARD1) == 2
    assert await pruned() == set(ONE)
    async with sessions.begin() as s:
        assert await turn_posts.prune_blobs(s, timedelta(days=30), claim=SHARD1) == 0  # done already
        assert await turn_posts.prune_blobs(s, timedelta(days=30), claim=SHARD0) == 2
    assert await pruned() == set(ZERO + ONE)


async def test_departed_servers_of_the_claim_only(sessions):
    """A process knows only its own shards' servers (bot.guilds): the other shards' servers are not
    ones that removed the bot, and their due deletions are their shard's process's to make."""
    await _sessions(sessions)
    async with sessions.begin() as s:
        await s.execute(insert(AuditLog), [
            {"guild_id": g, "actor_id": 1, "actor_name": "mod", "action": "pause"} for g in (ZERO[0], ONE[0])
        ])
    async with sessions() as s:
        # Shard 0's process is in ZERO[0] only: ZERO[1] removed it while it was away; ONE is not its to judge.
        assert await departures.unknown_guilds(s, [ZERO[0]], SHARD0) == [ZERO[1]]
        assert await departures.unknown_guilds(s, [ONE[1]], SHARD1) == [ONE[0]]
        assert await departures.unknown_guilds(s, [ZERO[0]], ALL) == sorted([ZERO[1], *ONE])  # every shard here
        assert await departures.unknown_guilds(s, [ZERO[0]]) == sorted([ZERO[1], *ONE])

    left = datetime(2026, 1, 1, tzinfo=UTC)
    async with sessions.begin() as s:
        for guild_id in (ZERO[1], ONE[0]):
            await departures.record_departure(s, guild_id, 30, now=left)
    later = left + timedelta(days=31)
    async with sessions() as s:
        assert await departures.unknown_guilds(s, [], SHARD0) == [ZERO[0]]  # a departure is known already
        assert await departures.due(s, now=later, claim=SHARD0) == [ZERO[1]]
        assert await departures.due(s, now=later, claim=SHARD1) == [ONE[0]]
        assert await departures.due(s, now=later) == await departures.due(s, now=later, claim=ALL) == [ZERO[1], ONE[0]]
        assert (await s.scalars(select(GuildDeparture.guild_id).where(claimed(GuildDeparture.guild_id, SHARD1)))).all() == [ONE[0]]


async def test_the_status_board_leaves_another_shards_progress_alone(sessions, monkeypatch):
    """Every process hears every turn's progress NOTIFY: only the process of the turn's shard edits
    its status message (an edit from another could land after the post and undo it)."""
    games = await _sessions(sessions)
    limits = Limits(max_instruction_len=300, cooldown_seconds=0, backlog_cap=20)
    ids = {}
    for guild_id in (ZERO[0], ONE[0]):
        async with sessions.begin() as s:
            gs = await s.get(GameSession, games[guild_id].id)
            assert gs is not None
            ins = build_instruction(QIQI, ["qiqi"], "walk", "town", "", "")
            t, _made = await turns.submit_turn(s, gs, 1, ready_made("alice", ins), limits=limits, enqueue=None)
            await turn_posts.set_status_message(s, t.id, 555_000 + guild_id % 1000)
        async with sessions.begin() as s:
            assert await turn_results.start_turn(s, t.id, 2) is not None
        ids[guild_id] = (t.id, gs.channel_id)

    edits: list[tuple[int, int]] = []
    edit_log = SimpleNamespace(routine=lambda channel_id, message_id, **fields: edits.append((channel_id, message_id)))
    db = SimpleNamespace(sessions=sessions)
    client = SimpleNamespace(guilds=[], get_channel=lambda channel_id: None)

    async def server_language(_bot, guild_id, channel_id):
        return "en"

    monkeypatch.setattr(locale, "server_language", server_language)
    board = StatusBoard(client, service=service_on(SimpleNamespace(), db, StoredJobs()), db=db, languages=None,  # type: ignore[arg-type]
                        claim=SHARD0, edits=edit_log, wake_notifier=lambda: None, refresh_delay=0)  # type: ignore[arg-type]
    try:
        for _ in range(3):
            for turn_id, channel_id in ids.values():
                board.progress(turn_id, channel_id, 0.5, "mllm")
            # every task the board spawned (and those they spawned) has ended, its refresh too
            await wait_for(lambda: not board._tasks and (board._refresher is None or board._refresher.done()),
                           timeout=10, interval=0.01, what="the board's tasks done")
    finally:
        await board.close()
    mine, theirs = ids[ZERO[0]], ids[ONE[0]]
    assert edits and {channel for channel, _ in edits} == {mine[1]}
    assert mine[0] in board._cards and theirs[0] not in board._cards and theirs[0] in board._closed
