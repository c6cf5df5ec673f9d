"""The game's rows against a real Postgres: what the bot, the worker and the play page rely on.
Turns are queued through the one path that checks them (service.turn_queue), whose refusals
are tested here with the rows they guard."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import func, select, update

from contracts import representation
from contracts.turn import TurnResult
from db import audit, guilds, turn_posts, turn_reads, turn_results, turns
from db import sessions as gsess
from db.guilds import Limits
from db.models import GameSession, Turn
from game import stored_reasons
from game.catalogue import FILMS
from game.errors import GameError
from game.instruction import build_instruction
from game.session_errors import CharacterTaken, NotJoined, SessionExists, SessionPaused
from game.states import CharacterState, Prediction
from game.turn_errors import BacklogFull, Cooldown, TurnNotCancellable
from service import configs, refusals, turn_queue
from testkit.queue import ready_made

QIQI = FILMS["qiqi"]
LIMITS = Limits(max_instruction_len=300, cooldown_seconds=0, backlog_cap=3)
GUILD, CHANNEL = 100, 200


async def _game(sessions, players=(("1", "alice", "qiqi"), ("2", "bob", "jiji"))):
    async with sessions.begin() as s:
        gs = await gsess.start_session(s, GUILD, CHANNEL, QIQI, created_by=1)
        for uid, name, ch in players:
            await gsess.join(s, gs, QIQI, int(uid), name, ch)
    return gs


async def _submit(sessions, gs, author=1, chars=("qiqi",), limits=LIMITS, enqueue=None, motion="fly on broomstick"):
    async with sessions.begin() as s:
        gs = await s.get(GameSession, gs.id)
        ins = build_instruction(QIQI, list(chars), motion, "sky", "quickly", "night")
        turn, _made = await turn_queue.submit_turn(s, gs, author, ready_made(f"user{author}", ins), limits=limits, enqueue=enqueue)
        return turn


def _result(ml=3, sc=1, et=2, st=-1, rep=True, mp4=b"\x00\x00\x00\x18ftypmp42"):
    return TurnResult(
        prediction=Prediction(ml, sc, et, st),
        motion_scope=10.0,
        mp4=mp4,
        representation=np.ones((226, 1920), np.float32) * 0.5 if rep else None,
        timings={"mllm": 0.1},
    )


async def _run(sessions, turn_id, result=None, window=2):
    async with sessions.begin() as s:
        req = await turn_results.start_turn(s, turn_id, window)
    if req is None:
        return None, False
    async with sessions.begin() as s:
        ok = await turn_results.complete_turn(s, turn_id, result or _result(), "test")
    return req, ok


async def test_one_live_session_per_channel(sessions):
    """The unique index refuses a second live game (a start racing the service's check)."""
    await _game(sessions)
    with pytest.raises(SessionExists):
        async with sessions.begin() as s:
            await gsess.start_session(s, GUILD, CHANNEL, QIQI, created_by=2)
    async with sessions.begin() as s:  # another channel is fine
        await gsess.start_session(s, GUILD, CHANNEL + 1, QIQI, created_by=2)


async def test_concurrent_starts_make_one_session(sessions):
    async def start(uid):
        try:
            async with sessions.begin() as s:
                await gsess.start_session(s, GUILD, 999, QIQI, created_by=uid)
            return "ok"
        except SessionExists:
            return "exists"

    results = await asyncio.gather(*(start(i) for i in range(5)))
    assert results.count("ok") == 1


async def test_the_unique_indexes_refuse_a_join_racing_past_the_checks(sessions):
    """service.players.join checks who plays what; a join that raced past it meets the indexes
    (one player per character, one character per player), and the transaction stays usable."""
    gs = await _game(sessions, players=(("1", "alice", "qiqi"),))
    async with sessions.begin() as s:
        with pytest.raises(CharacterTaken, match="another player"):
            await gsess.join(s, gs, QIQI, 2, "bob", "qiqi")
        with pytest.raises(CharacterTaken):  # alice plays already: the index cannot tell the two apart
            await gsess.join(s, gs, QIQI, 1, "alice", "jiji")
        assert await gsess.player_of_character(s, gs.id, "jiji") is None
        alice = await gsess.player_of_character(s, gs.id, "qiqi")
        assert alice is not None and alice.user_id == 1
        await gsess.leave(s, gs, alice)
        await gsess.join(s, gs, QIQI, 2, "bob", "qiqi")  # free again
        assert [(p.user_id, p.character_id) for p in await gsess.players(s, gs.id)] == [(2, "qiqi")]
        assert (await gsess.states(s, gs.id))["qiqi"] == CharacterState()


async def test_submit_numbers_turns_and_builds_context(sessions):
    gs = await _game(sessions)
    t1 = await _submit(sessions, gs)
    t2 = await _submit(sessions, gs, author=2, chars=("jiji", "qiqi"))
    assert (t1.seq, t2.seq) == (1, 2)
    assert t2.instruction == "Character: Jiji, Qiqi; Motion: quickly fly on broomstick; Background: night sky."

    req1, ok = await _run(sessions, t1.id)
    assert ok and req1.history == () and req1.states_before == {"Qiqi": CharacterState()}
    req2, ok = await _run(sessions, t2.id, _result(ml=1, sc=-1, et=0, st=5))
    assert [h.instruction for h in req2.history] == [t1.instruction]
    assert req2.history[0].prediction == Prediction(3, 1, 2, -1)
    np.testing.assert_allclose(req2.history[0].representation, 0.5)
    assert req2.states_before["Qiqi"] == CharacterState(stamina=45, social=55, entertainment=60)

    async with sessions.begin() as s:
        st = await gsess.states(s, gs.id)
        t2row = await turn_reads.get_turn(s, t2.id, blobs=True)
    assert st["qiqi"] == CharacterState(stamina=70, social=50, entertainment=60)
    assert st["jiji"] == CharacterState(stamina=75, social=45, entertainment=50)
    assert t2row.states_before["jiji"] == {"stamina": 50, "social": 50, "entertainment": 50}
    assert t2row.states_after["qiqi"] == {"stamina": 70, "social": 50, "entertainment": 60}
    assert t2row.status == "done" and t2row.progress == 1.0
    assert representation.decode(t2row.representation).shape == (226, 1920)


async def test_history_skips_failed_turns_and_window(sessions):
    gs = await _game(sessions)
    big = Limits(300, 0, 10)
    ids = [(await _submit(sessions, gs, limits=big)).id for _ in range(4)]
    await _run(sessions, ids[0])
    async with sessions.begin() as s:
        await turn_results.start_turn(s, ids[1], 2)
        assert await turn_results.fail_turn(s, ids[1], "boom")
    await _run(sessions, ids[2])
    req, _ = await _run(sessions, ids[3], window=5)
    assert len(req.history) == 2  # turn 2 failed: context is turns 1 and 3
    req_w0 = None
    async with sessions.begin() as s:
        t = await _submit(sessions, gs, limits=big)
    async with sessions.begin() as s:
        req_w0 = await turn_results.start_turn(s, t.id, 0)
    assert req_w0.history == ()


async def test_complete_is_idempotent(sessions):
    gs = await _game(sessions)
    t = await _submit(sessions, gs)
    _, ok = await _run(sessions, t.id)
    assert ok
    async with sessions.begin() as s:
        assert await turn_results.start_turn(s, t.id, 2) is None  # a second delivery does nothing
        assert await turn_results.complete_turn(s, t.id, _result(), "test") is False
        st = await gsess.states(s, gs.id)
    assert st["qiqi"].social == 55  # applied once


async def test_refusals_not_joined_paused_backlog_cooldown(sessions):
    gs = await _game(sessions)
    with pytest.raises(NotJoined):
        await _submit(sessions, gs, author=42)
    for _ in range(3):
        await _submit(sessions, gs)
    with pytest.raises(BacklogFull, match="3 turns"):
        await _submit(sessions, gs)
    async with sessions.begin() as s:
        assert await s.scalar(select(func.count()).select_from(Turn)) == 3  # nothing half-written
        await gsess.set_paused(s, await s.get(GameSession, gs.id), True, note="maintenance")
    with pytest.raises(SessionPaused, match="maintenance"):
        await _submit(sessions, gs, author=2, chars=("jiji",))
    async with sessions.begin() as s:
        await gsess.set_paused(s, await s.get(GameSession, gs.id), False)
    slow = Limits(300, 30, 10)
    await _submit(sessions, gs, author=2, chars=("jiji",), limits=slow)
    with pytest.raises(Cooldown) as ei:
        await _submit(sessions, gs, author=2, chars=("jiji",), limits=slow)
    assert 0 < ei.value.seconds_left <= 30


async def test_enqueue_runs_in_the_same_transaction(sessions):
    gs = await _game(sessions)

    async def failing_enqueue(s, turn, gs):
        raise RuntimeError("queue is down")

    with pytest.raises(RuntimeError):
        await _submit(sessions, gs, enqueue=failing_enqueue)
    async with sessions.begin() as s:
        assert await s.scalar(select(func.count()).select_from(Turn)) == 0
        assert (await s.get(GameSession, gs.id)).next_seq == 1

    async def enqueue(s, turn, gs):
        return 1000 + turn.seq

    t = await _submit(sessions, gs, enqueue=enqueue)
    assert t.job_id == 1001


async def test_cancel_only_queued(sessions):
    gs = await _game(sessions)
    t = await _submit(sessions, gs)
    async with sessions.begin() as s:
        row = await turn_reads.get_turn(s, t.id)
        await turns.cancel_turn(s, row, "by a moderator")
    async with sessions.begin() as s:
        assert await turn_results.start_turn(s, t.id, 2) is None  # the job finds it cancelled
        row = await turn_reads.get_turn(s, t.id)
        with pytest.raises(TurnNotCancellable, match="cancelled"):
            await turns.cancel_turn(s, row)


async def test_regenerate_latest_undoes_states_and_requeues(sessions):
    gs = await _game(sessions)
    t = await _submit(sessions, gs)
    await _run(sessions, t.id)
    async with sessions.begin() as s:
        await turn_posts.mark_posted(s, t.id, 555)
        old_seed = (await turn_reads.get_turn(s, t.id)).seed
        again = await turn_queue.regenerate_latest(s, await s.get(GameSession, gs.id), None)
        assert again.id == t.id and again.status == "queued" and again.seed != old_seed
        assert again.posted_message_id is None
        assert (await gsess.states(s, gs.id))["qiqi"] == CharacterState()
    await _run(sessions, t.id, _result(sc=-2))
    async with sessions.begin() as s:
        assert (await gsess.states(s, gs.id))["qiqi"].social == 40


async def test_regenerate_refuses_unfinished(sessions):
    gs = await _game(sessions)
    await _submit(sessions, gs)
    async with sessions.begin() as s:
        with pytest.raises(GameError, match="still queued"):
            await turn_queue.regenerate_latest(s, await s.get(GameSession, gs.id), None)


async def _games(sessions, n: int) -> list[GameSession]:
    """n games in n channels of the guild, alice playing Qiqi in each."""
    out = []
    for i in range(n):
        async with sessions.begin() as s:
            gs = await gsess.start_session(s, GUILD, CHANNEL + 1 + i, QIQI, created_by=1)
            await gsess.join(s, gs, QIQI, 1, "alice", "qiqi")
        out.append(gs)
    return out


async def _claim(sessions, name):
    async with sessions.begin() as s:
        return [t.id for t in await turn_posts.claim_unposted(s, name)]


async def test_claim_unposted_is_exclusive_and_leased(sessions):
    ids = []
    for gs in await _games(sessions, 3):
        ids.append((await _submit(sessions, gs)).id)
        await _run(sessions, ids[-1])

    a, b = await asyncio.gather(_claim(sessions, "a"), _claim(sessions, "b"))
    assert sorted(a + b) == ids  # each turn claimed by exactly one poster
    assert await _claim(sessions, "c") == []  # leased
    async with sessions.begin() as s:
        await turn_posts.mark_posted(s, ids[0], 1)
        await s.execute(update(Turn).values(post_claimed_at=func.now() - timedelta(minutes=5)))
    assert await _claim(sessions, "d") == ids[1:]  # expired claims come back, posted ones never


async def test_claim_unposted_keeps_a_channel_in_order(sessions):
    """A session's turn is handed out only once every earlier finished turn is posted or given
    up; a postponed turn waits for its time, and holds back the later ones meanwhile."""
    gs = await _game(sessions)
    big = Limits(300, 0, 10)
    ids = [(await _submit(sessions, gs, limits=big)).id for _ in range(3)]
    for i in ids:
        await _run(sessions, i)
    assert await _claim(sessions, "a") == ids[:1]
    async with sessions.begin() as s:
        assert await turn_posts.postpone_post(s, ids[0], timedelta(minutes=1), "DiscordServerError: 502") == 1
        assert await turn_posts.next_post_retry(s, [GUILD]) is not None
    assert await _claim(sessions, "b") == []  # #1 waits for its next try; #2 and #3 wait for #1
    async with sessions.begin() as s:
        await s.execute(update(Turn).where(Turn.id == ids[0]).values(post_retry_at=func.now()))
    assert await _claim(sessions, "c") == ids[:1]
    async with sessions.begin() as s:
        await turn_posts.mark_posted(s, ids[0], None, "given up")  # given up: not in Discord
        row = await turn_reads.get_turn(s, ids[0])
        assert row.posted_message_id is None and row.post_error == "given up" and row.post_attempts == 1
    assert await _claim(sessions, "d") == ids[1:2]


async def test_reset_archives_and_restarts(sessions):
    gs = await _game(sessions)
    t = await _submit(sessions, gs)
    await _run(sessions, t.id)
    queued = await _submit(sessions, gs)
    async with sessions.begin() as s:
        fresh = await gsess.reset(s, await s.get(GameSession, gs.id), by=9)
    async with sessions.begin() as s:
        assert (await s.get(GameSession, gs.id)).status == "archived"
        assert (await turn_reads.get_turn(s, queued.id)).status == "cancelled"
        live = await gsess.live_session(s, CHANNEL)
        assert live.id == fresh.id and live.next_seq == 1
        assert {p.character_id for p in await gsess.players(s, fresh.id)} == {"qiqi", "jiji"}
        assert set((await gsess.states(s, fresh.id)).values()) == {CharacterState()}


async def test_pause_idle(sessions):
    gs = await _game(sessions)
    async with sessions.begin() as s:
        await s.execute(update(GameSession).values(last_activity_at=func.now() - timedelta(hours=3)))
        paused = [await gsess.set_paused(s, gs, True, stored_reasons.IDLE) for gs in await gsess.idle_sessions(s, timedelta(hours=2))]
    assert [p.id for p in paused] == [gs.id]
    with pytest.raises(SessionPaused, match="idle"):
        await _submit(sessions, gs)


async def test_guild_and_channel_config(sessions, settings):
    async with sessions.begin() as s:
        cfg = await guilds.channel_config(s, settings, GUILD, CHANNEL)
        assert cfg.film is None and cfg.limits.backlog_cap == settings.backlog_cap
        await guilds.set_film(s, GUILD, "qiqi")
        await guilds.set_film(s, GUILD, "ponyo", channel_id=CHANNEL + 1)
        await guilds.set_roles(s, GUILD, admin_role_ids=[7], moderator_role_ids=[8, 9])
        await guilds.set_limits(s, settings, GUILD, {"backlog_cap": 2, "cooldown_seconds": 0})
        await guilds.set_playable(s, GUILD, CHANNEL, [c.id for c in QIQI.characters if c.id != "tombo"])
        with pytest.raises(GameError, match="between 1 and 100"):  # what a guild may store
            configs.limit_values(backlog_cap=0)
    async with sessions.begin() as s:
        cfg = await guilds.channel_config(s, settings, GUILD, CHANNEL)
        other = await guilds.channel_config(s, settings, GUILD, CHANNEL + 1)
    assert cfg.film.id == "qiqi" and "tombo" not in {c.id for c in cfg.cast()} and "jiji" in {c.id for c in cfg.cast()}
    assert cfg.admin_role_ids == {7} and cfg.moderator_role_ids == {8, 9}
    assert cfg.limits == Limits(settings.max_instruction_len, 0, 2)
    assert other.film.id == "ponyo" and other.playable is None


async def test_guild_limits_only_tighten_the_operators(sessions, settings):
    """The operator's settings are the loosest limits: a guild's looser choice is stored as asked
    but never applies, and set_limits returns the limits that do."""
    op = settings.model_copy(update={"cooldown_seconds": 15.0, "backlog_cap": 5, "max_instruction_len": 300})
    async with sessions.begin() as s:
        effective = await guilds.set_limits(s, op, GUILD, {"cooldown_seconds": 0, "backlog_cap": 100, "max_instruction_len": 2000})
        assert effective == Limits(300, 15.0, 5)
        assert (await guilds.channel_config(s, op, GUILD, CHANNEL)).limits == Limits(300, 15.0, 5)
        # Stricter values apply as asked, one at a time; the others stay as they were.
        assert await guilds.set_limits(s, op, GUILD, {"cooldown_seconds": 60}) == Limits(300, 60, 5)
        assert await guilds.set_limits(s, op, GUILD, {"backlog_cap": 2, "max_instruction_len": 100}) == Limits(100, 60, 2)
        assert (await guilds.channel_config(s, op, GUILD, CHANNEL)).limits == Limits(100, 60, 2)
        # The operator tightening later wins over a guild's older, looser choice.
        stricter = op.model_copy(update={"cooldown_seconds": 120.0, "backlog_cap": 1, "max_instruction_len": 80})
        assert (await guilds.channel_config(s, stricter, GUILD, CHANNEL)).limits == Limits(80, 120.0, 1)


async def test_audit_log(sessions):
    async with sessions.begin() as s:
        await audit.record(s, guild_id=GUILD, actor_id=1, actor_name="mod", action="pause", channel_id=CHANNEL, details={"why": "x"})
        rows = await audit.recent(s, GUILD)
    assert [(r.action, r.details) for r in rows] == [("pause", {"why": "x"})]


async def test_prune_blobs_keeps_recent_context(sessions):
    gs = await _game(sessions)
    big = Limits(300, 0, 20)
    ids = []
    for _ in range(8):
        t = await _submit(sessions, gs, limits=big)
        await _run(sessions, t.id)
        ids.append(t.id)
    async with sessions.begin() as s:
        await s.execute(update(Turn).values(posted_at=func.now(), finished_at=func.now() - timedelta(days=40)))
        n = await turn_posts.prune_blobs(s, timedelta(days=30))
    assert n == 2  # turns 1-2 of 8; the last 6 keep their blobs
    async with sessions.begin() as s:
        kept = await turn_reads.get_turn(s, ids[-1], blobs=True)
        gone = await turn_reads.get_turn(s, ids[0], blobs=True)
    assert kept.mp4 and gone.mp4 is None and gone.blobs_pruned_at is not None


async def test_sessions_of_a_withdrawn_film_are_paused_not_broken(sessions, settings):
    """A film that leaves the catalogue pauses its sessions (states, players, queued turns kept:
    service.maintenance's job); playing it is refused with a message saying why; finished turns
    can still be shown."""
    from game.catalogue import display_film, packaged_films, session_film, use_films
    from game.errors import FilmWithdrawn
    from service import maintenance, moderation
    from service.deps import Deps, Member, Place
    from service.jobs import StoredJobs

    game = Deps(settings, sessions, StoredJobs())
    gs = await _game(sessions)
    turn = await _submit(sessions, gs)
    try:
        use_films({k: v for k, v in packaged_films().items() if k != "qiqi"})
        assert await maintenance.pause_withdrawn(game) == [gs.id]
        again = await maintenance.pause_withdrawn(game)  # already paused: nothing new
        async with sessions.begin() as s:
            row = await s.get(GameSession, gs.id)
            queued = await s.get(Turn, turn.id)
            kept = await gsess.players(s, gs.id)
        assert again == [] and (row.status, row.paused_reason) == ("paused", stored_reasons.FILM_WITHDRAWN)
        assert queued.status == "queued" and len(kept) == 2
        with pytest.raises(SessionPaused, match="film withdrawn"):
            async with sessions() as s:
                await refusals.running_session(s, CHANNEL)
        with pytest.raises(FilmWithdrawn):
            session_film(row.film_id)
        with pytest.raises(FilmWithdrawn):  # a moderator cannot resume it while the film is away
            await moderation.resume(game, Place(GUILD, CHANNEL), Member(3))
        async with sessions() as s:
            assert (await s.get(GameSession, gs.id)).status == "paused"
        assert display_film(row.film_id).title == "qiqi (withdrawn)"
    finally:
        use_films(None)
    # Back in the catalogue: a moderator resumes and the game goes on where it was.
    await moderation.resume(game, Place(GUILD, CHANNEL), Member(3))
    assert await maintenance.pause_withdrawn(game) == []
