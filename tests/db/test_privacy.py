"""Members' data and servers the bot left, against a real Postgres: /privacy show's counts, a
deletion request carried out (everywhere, idempotent, after a restart halfway, while a turn of
the member runs), a departed server's data deleted after the retention, the play page's clips
pruned."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
from aiohttp import web
from sqlalchemy import delete, func, select, text, update

from contracts.turn import TurnResult
from db import audit, departures, privacy, removal, turn_posts, turn_reads, turn_results, turns
from db import sessions as gsess
from db.models import (
    AuditLog,
    CharacterStateRow,
    ContentFilterTerm,
    GameSession,
    GuildDeparture,
    Player,
    PrivacyRequest,
    PrivacyTombstone,
    QueueChannel,
    QueueShare,
    Turn,
    VoteBallot,
    VoteProposal,
    VoteRound,
)
from game import stored_reasons
from game.catalogue import FILMS
from game.instruction import build_instruction
from game.states import Prediction
from play.page import PAGE
from play.retention import prune as prune_page

QIQI = FILMS["qiqi"]
ALICE, BOB, DAVE = 424242424242, 515151515151, 616161616161
G1, G2 = 1_000_000_001, 1_000_000_002
TABLES = ("players", "turns", "vote_proposals", "vote_ballots", "vote_rounds", "audit_log", "game_sessions", "privacy_requests",
          "content_filter_terms")


def _result() -> TurnResult:
    return TurnResult(
        prediction=Prediction(3, 1, 2, -1), motion_scope=10.0, mp4=b"\x00\x00\x00\x18ftypmp42",
        representation=np.ones((226, 1920), np.float32) * 0.5, timings={"mllm": 0.1},
    )


async def _turn(sessions, gs, author: int, name: str, motion: str = "secretly dance", finish: bool = True) -> int:
    async with sessions.begin() as s:
        gs = await s.get(GameSession, gs.id)
        ins = build_instruction(QIQI, ["qiqi"], motion, "the bakery", "quickly", "night")
        t = await turns.insert_turn(s, gs, author_id=author, author_name=name, instruction=ins, enqueue=None)
    if finish:
        async with sessions.begin() as s:
            await turn_results.start_turn(s, t.id, 2)
        async with sessions.begin() as s:
            assert await turn_results.complete_turn(s, t.id, _result(), "test")
    return t.id


async def _world(sessions):
    """G1: alice (qiqi) and bob (jiji) play; alice 2 turns, bob 1; a closed vote round (alice's
    proposal won, bob and alice voted) and an open one; audit: alice set the film, dave kicked
    alice, dave cancelled a turn of bob's "for alice-wonder", the content rules refused an
    instruction of alice's; alice added a filter term. G2: alice plays alone, 1 turn."""
    async with sessions.begin() as s:
        await s.execute(delete(ContentFilterTerm))  # not among the tables the fixture empties
        s.add(ContentFilterTerm(guild_id=G1, term="spoilers", added_by=ALICE))
        g1 = await gsess.start_session(s, G1, 11, QIQI, created_by=ALICE)
        await gsess.join(s, g1, QIQI, ALICE, "alice-wonder", "qiqi")
        await gsess.join(s, g1, QIQI, BOB, "bobby", "jiji")
        g2 = await gsess.start_session(s, G2, 22, QIQI, created_by=ALICE)
        await gsess.join(s, g2, QIQI, ALICE, "alice-in-g2", "qiqi")
    a1 = await _turn(sessions, g1, ALICE, "alice-wonder")
    b1 = await _turn(sessions, g1, BOB, "bobby", motion="walk")
    a2 = await _turn(sessions, g1, ALICE, "alice-wonder")
    a3 = await _turn(sessions, g2, ALICE, "alice-in-g2")
    b2 = await _turn(sessions, g1, BOB, "bobby", motion="run", finish=False)
    async with sessions.begin() as s:
        row = await s.get(Turn, b2)
        await turns.cancel_turn(s, row, stored_reasons.CANCELLED_BY_MODERATOR)
        await turns.note_canceller(s, row, "dave", "asked by alice-wonder")
        await gsess.set_paused(s, await s.get(GameSession, g2.id), True, note="alice-in-g2 went to lunch")
        now = datetime.now(UTC)
        closed = VoteRound(session_id=g1.id, guild_id=G1, channel_id=11, status="closed", opened_by=ALICE, deadline=now, turn_id=a2)
        open_ = VoteRound(session_id=g1.id, guild_id=G1, channel_id=11, status="open", opened_by=BOB, deadline=now + timedelta(hours=1))
        s.add_all([closed, open_])
        await s.flush()
        cols = dict(characters=["qiqi"], character_names=["Qiqi"], motion="secretly dance", background="the bakery",
                    instruction="Character: Qiqi; Motion: secretly dance; Background: the bakery.")
        p_closed = VoteProposal(round_id=closed.id, author_id=ALICE, author_name="alice-wonder", **cols)
        p_open = VoteProposal(round_id=open_.id, author_id=ALICE, author_name="alice-wonder", **cols)
        p_bob = VoteProposal(round_id=open_.id, author_id=BOB, author_name="bobby",
                             **{**cols, "motion": "wave", "instruction": "Character: Qiqi; Motion: wave; Background: the bakery."})
        s.add_all([p_closed, p_open, p_bob])
        await s.flush()
        closed.winner_id = p_closed.id
        s.add_all([
            VoteBallot(round_id=closed.id, voter_id=ALICE, proposal_id=p_closed.id),
            VoteBallot(round_id=closed.id, voter_id=BOB, proposal_id=p_closed.id),
            VoteBallot(round_id=open_.id, voter_id=BOB, proposal_id=p_open.id),
            VoteBallot(round_id=open_.id, voter_id=ALICE, proposal_id=p_bob.id),
        ])
        await audit.record(s, guild_id=G1, actor_id=ALICE, actor_name="alice-wonder", action="set_film", target="qiqi")
        await audit.record(s, guild_id=G1, actor_id=DAVE, actor_name="dave", action="kick", target=str(ALICE),
                           details={"player": "alice-wonder", "character": "qiqi"})
        await audit.record(s, guild_id=G1, actor_id=DAVE, actor_name="dave", action="cancel_turn", target="4",
                           details={"reason": "for alice-wonder"})
        await audit.record(s, guild_id=G1, actor_id=ALICE, actor_name="alice-wonder", action="instruction_refused", target="/act",
                           details={"rule_set": "server", "term": "spoilers", "text": "secretly dance with spoilers"})
    return g1, g2, {"a1": a1, "a2": a2, "a3": a3, "b1": b1, "b2": b2}


async def _traces(sessions, needles) -> list[str]:
    """Rows of the app's tables whose text holds any of `needles` (ids, names, words)."""
    found = []
    async with sessions() as s:
        for table in TABLES:
            for row in (await s.execute(text(f"SELECT t::text FROM {table} t"))).scalars():
                found += [f"{table}: {needle}" for needle in needles if needle in row]
    return found


async def _states(sessions, session_id):
    async with sessions() as s:
        rows = (await s.scalars(select(CharacterStateRow).where(CharacterStateRow.session_id == session_id))).all()
    return {r.character_id: (r.stamina, r.social, r.entertainment) for r in rows}


async def test_show_counts_here_and_everywhere(sessions):
    await _world(sessions)
    async with sessions() as s:
        mine = await privacy.stored(s, ALICE, G1)
        bobs = await privacy.stored(s, BOB, G2)
    assert mine.here == privacy.Counts(games=1, turns=2, clips=2, votes=4, audit=3)  # 2 ballots + 2 proposals
    assert mine.everywhere == privacy.Counts(games=2, turns=3, clips=3, votes=4, audit=3)
    assert (mine.servers, mine.pending) == (2, False)
    assert bobs.here.empty and bobs.everywhere.turns == 2 and bobs.servers == 1


async def test_delete_everywhere_keeps_other_players_games(sessions):
    g1, g2, ids = await _world(sessions)
    states_before = await _states(sessions, g1.id)
    async with sessions.begin() as s:  # a moderator took one of hers down first, quoting her in their words
        await removal.take_down_turns(s, [ids["a2"]], note="copied alice-wonder's idea", by_id=DAVE, by_name="dave")
    assert await _traces(sessions, [str(ALICE), "alice-wonder", "alice-in-g2", "secretly dance"])
    async with sessions.begin() as s:
        req, new = await privacy.request_deletion(s, ALICE)
        again, new_again = await privacy.request_deletion(s, ALICE)
    assert new and not new_again and again.id == req.id
    async with sessions() as s:
        assert (await privacy.stored(s, ALICE, G1)).pending

    assert await privacy.process(sessions, req.id) == privacy.STEPS

    assert await _traces(sessions, [str(ALICE), "alice-wonder", "alice-in-g2", "secretly dance"]) == []
    async with sessions() as s:
        left = await privacy.stored(s, ALICE, G1)
        assert left.everywhere.empty and left.servers == 0 and not left.pending
        tombs = {g: i for g, i in (await s.execute(select(PrivacyTombstone.guild_id, PrivacyTombstone.id))).all()}
        assert set(tombs) == {G1, G2} and tombs[G1] != tombs[G2]  # one per server: not linkable
        rows = {t.id: t for t in (await s.scalars(select(Turn).options())).all()}
        for key in ("a1", "a2", "a3"):
            t = rows[ids[key]]
            assert t.author_name == privacy.DELETED_NAME and t.instruction == "" and t.removed_at is not None
            assert await s.scalar(select(Turn.mp4).where(Turn.id == t.id)) is None
        assert rows[ids["a1"]].author_id == -tombs[G1] and rows[ids["a3"]].author_id == -tombs[G2]
        # bob's turns: untouched, the numbers of the session unchanged
        b1 = rows[ids["b1"]]
        assert b1.author_name == "bobby" and b1.instruction and await s.scalar(select(Turn.mp4).where(Turn.id == b1.id))
        assert [t.seq for t in sorted(rows.values(), key=lambda t: t.id) if t.session_id == g1.id] == [1, 2, 3, 4]
        # why they were taken down: codes; the moderator's words kept without her name
        assert (rows[ids["a1"]].removed_reason, rows[ids["a1"]].removed_note) == (stored_reasons.PRIVACY_DELETED, None)
        assert (rows[ids["a2"]].removed_reason, rows[ids["a2"]].removed_note) == (
            stored_reasons.REMOVER_WORDS, "copied deleted member's idea")
        b2 = rows[ids["b2"]]  # the code and the moderator's name kept, her name gone from the words
        assert (b2.error, b2.cancelled_by_name, b2.cancel_note) == ("cancelled_by_moderator", "dave", "asked by deleted member")
        g2_now = await s.get(GameSession, g2.id)
        assert (g2_now.paused_reason, g2_now.paused_note) == ("moderator_words", "deleted member went to lunch")
        assert [p.user_name for p in await gsess.players(s, g1.id)] == ["bobby"]
        assert await s.scalar(select(func.count()).select_from(Player).where(Player.session_id == g2.id)) == 0
        assert (await s.get(GameSession, g1.id)).created_by == -tombs[G1]
        # votes: the open round lost alice's proposal (and bob's vote for it) and her ballot; the closed one is anonymous
        props = (await s.scalars(select(VoteProposal).order_by(VoteProposal.id))).all()
        assert [(p.author_name, p.instruction == "") for p in props] == [(privacy.DELETED_NAME, True), ("bobby", False)]
        ballots = (await s.execute(select(VoteBallot.voter_id, VoteBallot.proposal_id).order_by(VoteBallot.voter_id))).all()
        assert sorted(v for v, _ in ballots) == sorted([-tombs[G1], BOB])
        kick = (await s.scalars(select(AuditLog).where(AuditLog.action == "kick"))).one()
        assert (kick.target, kick.details["player"]) == (str(-tombs[G1]), privacy.DELETED_NAME)
        refused = (await s.scalars(select(AuditLog).where(AuditLog.action == "instruction_refused"))).one()
        assert refused.actor_id == -tombs[G1] and refused.details["text"] == "" and refused.details["term"] == "spoilers"
        assert (await s.scalars(select(ContentFilterTerm.added_by))).one() == -tombs[G1]
        done = await s.get(PrivacyRequest, req.id)
        assert done is not None and (done.status, done.user_id, done.names, done.turns_removed) == ("done", None, None, 2)  # a2 was already down
    assert await _states(sessions, g1.id) == states_before  # character states stay as the turns made them


async def test_idempotent_and_restart_halfway(sessions):
    g1, _, ids = await _world(sessions)
    async with sessions.begin() as s:
        req, _ = await privacy.request_deletion(s, ALICE)
    assert await privacy.process(sessions, req.id, max_steps=2) == 2  # collected, turns taken down: then a "crash"
    async with sessions() as s:
        halfway = await s.get(PrivacyRequest, req.id)
        assert halfway is not None and (halfway.status, halfway.step) == ("pending", 2) and halfway.user_id == ALICE
        assert (await s.get(Turn, ids["a1"])).removed_at is not None
    assert await privacy.process_pending(sessions) == [req.id]  # the job picks it up where it stopped
    assert await _traces(sessions, [str(ALICE), "alice-wonder", "alice-in-g2"]) == []
    assert await privacy.process(sessions, req.id) == 0  # done: nothing more
    async with sessions.begin() as s:  # asking again finds nothing left and is done at once
        again, new = await privacy.request_deletion(s, ALICE)
    assert new and await privacy.process(sessions, again.id) == privacy.STEPS
    async with sessions() as s:
        assert await s.scalar(select(PrivacyRequest.turns_removed).where(PrivacyRequest.id == again.id)) == 0


async def test_delete_while_a_turn_is_generated(sessions):
    """The worker holds alice's running turn; the deletion cancels it, and the worker's result
    then writes nothing back (complete_turn finds it no longer running)."""
    g1, _, _ = await _world(sessions)
    running = await _turn(sessions, g1, ALICE, "alice-wonder", motion="secretly sing", finish=False)
    async with sessions.begin() as s:
        assert await turn_results.start_turn(s, running, 2) is not None
    async with sessions.begin() as s:
        req, _ = await privacy.request_deletion(s, ALICE)
    await privacy.process(sessions, req.id)
    async with sessions.begin() as s:
        assert not await turn_results.complete_turn(s, running, _result(), "test")  # the worker finishes afterwards
    async with sessions() as s:
        t = await turn_reads.get_turn(s, running, blobs=True)
        assert t is not None and t.status == "cancelled" and t.mp4 is None and t.representation is None
        assert t.author_name == privacy.DELETED_NAME and t.instruction == ""
    assert await _traces(sessions, [str(ALICE), "alice-wonder", "secretly sing"]) == []


async def test_departed_server_deleted_after_retention_unless_back(sessions):
    g1, g2, _ = await _world(sessions)
    left = datetime(2026, 1, 1, tzinfo=UTC)
    async with sessions.begin() as s:
        row = await departures.record_departure(s, G1, 30, now=left)
        await departures.record_departure(s, G1, 30, now=left + timedelta(days=5))  # again: the first date holds
        assert row.delete_after == left + timedelta(days=30)
        assert await departures.due(s, now=left + timedelta(days=29)) == []
        assert await departures.due(s, now=left + timedelta(days=30)) == [G1]
        await departures.record_departure(s, G2, 30, now=left)
        assert await departures.cancel_departures(s, [G2]) == [G2]  # the bot was added back to G2
        # Their places in the fair order: a server's row, and its channel's (keyed by channel only).
        for guild_id, channel_id in ((G1, 11), (G2, 22)):
            s.add(QueueShare(queue_name="turns-qiqi", guild_id=guild_id, pass_=1.0))
            s.add(QueueChannel(queue_name="turns-qiqi", channel_id=channel_id, taken=1.0))
    async with sessions.begin() as s:
        for guild_id in await departures.due(s, now=left + timedelta(days=31)):
            counts = await departures.delete_guild_data(s, guild_id)
            assert counts["game_sessions"] == 1 and counts["audit_log"] == 4 and counts["content_filter_terms"] == 1
            assert counts["queue_shares"] == 1 and counts["queue_channels"] == 1
    async with sessions() as s:
        assert await s.get(GameSession, g1.id) is None
        assert await s.scalar(select(func.count()).select_from(Turn).where(Turn.session_id == g1.id)) == 0
        assert await s.scalar(select(func.count()).select_from(VoteRound)) == 0
        assert await s.scalar(select(func.count()).select_from(AuditLog)) == 0
        assert await s.get(GameSession, g2.id) is not None  # the other server keeps everything
        assert await s.scalar(select(func.count()).select_from(Turn).where(Turn.session_id == g2.id)) == 1
        assert await s.scalar(select(func.count()).select_from(GuildDeparture)) == 0
        assert (await s.scalars(select(QueueShare.guild_id))).all() == [G2]
        assert (await s.scalars(select(QueueChannel.channel_id))).all() == [22]


async def test_play_page_turns_are_pruned_like_discord_ones(sessions):
    """The page never posts its turns: its pruner has prune_blobs count them as posted."""
    async with sessions.begin() as s:
        page = await gsess.start_session(s, 1, 1, QIQI, created_by=None)
        await gsess.join(s, page, QIQI, 77, "tab", "qiqi")
    ids = [await _turn(sessions, page, 77, "tab", motion="walk") for _ in range(8)]
    async with sessions.begin() as s:
        await s.execute(update(Turn).values(finished_at=func.now() - timedelta(days=40)))
        assert await turn_posts.prune_blobs(s, timedelta(days=30)) == 0  # unposted: a Discord poster may still need them
    app = web.Application()  # the page's pruner (play/retention.py, a background task of the page's app)
    kept_days = SimpleNamespace(blob_retention_days=30)
    app[PAGE] = SimpleNamespace(deps=SimpleNamespace(sessions=sessions, settings=kept_days),  # the page's service dependencies
                                db=SimpleNamespace(sessions=sessions), settings=kept_days)
    assert await prune_page(app) == 2
    async with sessions() as s:
        gone = await turn_reads.get_turn(s, ids[0], blobs=True)
        kept = await turn_reads.get_turn(s, ids[-1], blobs=True)
    assert gone is not None and gone.mp4 is None and gone.blobs_pruned_at is not None
    assert kept is not None and kept.mp4
