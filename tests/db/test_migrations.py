"""Migrations build the whole schema from empty, downgrade back, and agree with the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import make_engine
from db.migrate import downgrade, head_revision, include_object, upgrade
from db.models import Base
from testkit.pg import fresh_database


async def _tables(engine) -> set[str]:
    async with engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


async def test_round_trip_from_empty():
    with fresh_database("agmig") as url:
        engine = make_engine(url)
        try:
            await upgrade(engine)
            tables = await _tables(engine)
            assert set(Base.metadata.tables) <= tables
            await downgrade(engine, "base")
            assert await _tables(engine) <= {"alembic_version"}
            await upgrade(engine)
            async with engine.connect() as conn:
                rev = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            assert rev == head_revision()
        finally:
            await engine.dispose()


async def test_models_and_migrations_agree(database_url):
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:

            def diff(sync_conn):
                ctx = MigrationContext.configure(
                    sync_conn,
                    opts={
                        "compare_type": True,
                        "compare_server_default": True,
                        "include_object": include_object,
                    },
                )
                return compare_metadata(ctx, Base.metadata)

            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()


async def test_audit_turn_targets_become_numbers_and_still_render():
    """Revision 0011: entries written before it named a turn `turn #4`; after it the target is the
    number, and the entry reads as it did."""
    from bot.parts.audit import describe
    from db.models import AuditLog

    with fresh_database("agmig") as url:
        engine = make_engine(url)
        try:
            await upgrade(engine, "0010")
            async with engine.begin() as conn:
                await conn.execute(text(
                    "INSERT INTO audit_log (guild_id, actor_id, actor_name, action, target, details) VALUES "
                    "(1, 3, 'dave', 'cancel_turn', 'turn #4', '{\"reason\": \"spoilers\"}'), "
                    "(1, 3, 'dave', 'filter_add', 'turn #4', '{}')"))
            await upgrade(engine, "0011")
            async with engine.connect() as conn:
                rows = (await conn.execute(text("SELECT action, target, details FROM audit_log ORDER BY id"))).all()
            assert [(a, t) for a, t, _ in rows] == [("cancel_turn", "4"), ("filter_add", "turn #4")]  # a term stays as typed
            entry = AuditLog(guild_id=1, actor_id=3, actor_name="dave", action=rows[0][0], target=rows[0][1], details=rows[0][2])
            assert describe(entry) == "<@3> (dave) cancelled turn #4 (spoilers)"
            await downgrade(engine, "0010")
            async with engine.connect() as conn:
                assert (await conn.scalar(text("SELECT target FROM audit_log WHERE action = 'cancel_turn'"))) == "turn #4"
        finally:
            await engine.dispose()


async def test_turn_failure_reasons_become_codes_and_still_read():
    """Revision 0013: a failed turn's fixed reasons, stored as English sentences before it, become
    codes that game.turn_texts renders; a backend's own words stay as written."""
    from game.turn_texts import failure_text

    lost = "This turn was lost: its worker stopped with an error. Try again."
    generic = "The generator failed on this turn (RuntimeError). Try again, or ask a moderator to check the worker's log."
    with fresh_database("agmig") as url:
        engine = make_engine(url)
        try:
            await upgrade(engine, "0012")
            async with engine.begin() as conn:
                gid = await conn.scalar(text(
                    "INSERT INTO game_sessions (guild_id, channel_id, film_id) VALUES (1, 2, 'qiqi') RETURNING id"))
                for seq, error in enumerate((lost, generic, "the GPU caught fire"), start=1):
                    await conn.execute(text(
                        "INSERT INTO turns (session_id, seq, author_id, author_name, characters, motion, background, "
                        "instruction, seed, status, error) "
                        "VALUES (:g, :seq, 3, 'dave', '{qiqi}', 'walk', 'town', 'walk', 1, 'failed', :error)"),
                        {"g": gid, "seq": seq, "error": error})
            await upgrade(engine, "0013")
            async with engine.connect() as conn:
                stored = list((await conn.scalars(text("SELECT error FROM turns ORDER BY seq"))).all())
            assert stored == ["lost", "generator_failed:RuntimeError", "the GPU caught fire"]
            assert [failure_text(e) for e in stored] == [lost, generic, "The generator reported: the GPU caught fire"]
            await downgrade(engine, "0012")
            async with engine.connect() as conn:
                assert list((await conn.scalars(text("SELECT error FROM turns ORDER BY seq"))).all()) == [
                    lost, generic, "the GPU caught fire"]
        finally:
            await engine.dispose()


async def test_pause_and_cancel_reasons_become_codes_and_still_read():
    """Revision 0014: pause and cancel reasons stored as sentences before it become codes
    (game.stored_reasons), with a moderator's words and name apart; the downgrade writes them back."""
    from game.stored_reasons import cancel_reason, pause_text

    pauses = ["idle", "film withdrawn", "paused by a moderator", "too loud tonight", None]
    cancels = ["cancelled", "the game was reset", "removed", "cancelled by a moderator", "cancelled by dave: spoilers: all",
               "cancelled by alice", "cancelled by dave", "ロボが取り消し"]
    with fresh_database("agmig") as url:
        engine = make_engine(url)
        try:
            await upgrade(engine, "0013")
            async with engine.begin() as conn:
                for channel, reason in enumerate(pauses, start=1):
                    await conn.execute(text(
                        "INSERT INTO game_sessions (guild_id, channel_id, film_id, status, paused_reason) "
                        "VALUES (1, :c, 'qiqi', 'paused', :r)"), {"c": channel, "r": reason})
                gid = await conn.scalar(text("SELECT id FROM game_sessions WHERE channel_id = 1"))
                for seq, error in enumerate(cancels, start=1):
                    await conn.execute(text(
                        "INSERT INTO turns (session_id, seq, author_id, author_name, characters, motion, background, "
                        "instruction, seed, status, error) "
                        "VALUES (:g, :seq, 3, 'alice', '{qiqi}', 'walk', 'town', 'walk', 1, 'cancelled', :error)"),
                        {"g": gid, "seq": seq, "error": error})
            await upgrade(engine, "0014")
            async with engine.connect() as conn:
                paused = (await conn.execute(text(
                    "SELECT paused_reason, paused_note FROM game_sessions ORDER BY channel_id"))).all()
                turns = (await conn.execute(text(
                    "SELECT error, cancelled_by_name, cancel_note FROM turns ORDER BY seq"))).all()
            assert [tuple(r) for r in paused] == [
                ("idle", None), ("film_withdrawn", None), ("moderator", None), ("moderator_words", "too loud tonight"),
                (None, None)]
            assert [tuple(r) for r in turns] == [
                ("cancelled", None, None), ("reset", None, None), ("removed", None, None),
                ("cancelled_by_moderator", None, None), ("cancelled_by_moderator", "dave", "spoilers: all"),
                ("cancelled_by_author", "alice", None), ("cancelled_by_moderator", "dave", None), ("ロボが取り消し", None, None)]
            # Read as before the codes (a reason in another language stays as written).
            assert [pause_text(*r) for r in paused] == ["idle", "film withdrawn", "paused by a moderator", "too loud tonight", ""]
            assert [str(cancel_reason(*r)) for r in turns] == cancels
            await downgrade(engine, "0013")
            async with engine.connect() as conn:
                assert list((await conn.scalars(text("SELECT paused_reason FROM game_sessions ORDER BY channel_id"))).all()) == pauses
                assert list((await conn.scalars(text("SELECT error FROM turns ORDER BY seq"))).all()) == cancels
        finally:
            await engine.dispose()


async def test_refused_rule_sets_become_codes_and_still_read():
    """Revision 0015: a refused text's entry named its rule set in English; after it the entry
    keeps a code (an AutoMod rule's name apart) and reads as it did."""
    from bot.parts.audit import describe
    from db.models import AuditLog

    names = ["the operator's rules", "this server's filter", "this server's AutoMod rule No: spoilers"]
    with fresh_database("agmig") as url:
        engine = make_engine(url)
        try:
            await upgrade(engine, "0014")
            async with engine.begin() as conn:
                for name in names:
                    await conn.execute(text(
                        "INSERT INTO audit_log (guild_id, actor_id, actor_name, action, target, details) "
                        "VALUES (1, 3, 'dave', 'instruction_refused', '/act', jsonb_build_object('rule_set', CAST(:n AS text), 'term', 'x'))"),
                        {"n": name})
                await conn.execute(text("INSERT INTO audit_log (guild_id, actor_id, actor_name, action, target, details) "
                                        "VALUES (1, 3, 'dave', 'pause', 'session 1', '{\"rule_set\": \"the operator''s rules\"}')"))
            await upgrade(engine, "0015")
            async with engine.connect() as conn:
                rows = (await conn.execute(text("SELECT action, target, details FROM audit_log ORDER BY id"))).all()
            assert [d for _, _, d in rows] == [
                {"rule_set": "operator", "term": "x"}, {"rule_set": "server_filter", "term": "x"},
                {"rule_set": "automod", "rule": "No: spoilers", "term": "x"},
                {"rule_set": "the operator's rules"}]  # not a refusal's entry: left as it is
            said = [describe(AuditLog(guild_id=1, actor_id=3, actor_name="dave", action=a, target=t, details=d))
                    for a, t, d in rows[:3]]
            assert said == [f"<@3> (dave) had an instruction refused by {n} in /act" for n in names]
            await downgrade(engine, "0014")
            async with engine.connect() as conn:
                back = list((await conn.scalars(text("SELECT details FROM audit_log ORDER BY id"))).all())
            assert back[:3] == [{"rule_set": n, "term": "x"} for n in names]
        finally:
            await engine.dispose()


async def test_round_outcomes_and_removal_reasons_become_codes_and_still_read():
    """Revision 0016: how a vote round ended and why a shot was taken down were English sentences;
    after it they are codes (a remover's words apart, in removed_note), shown as before in English
    and now in the reader's language; the downgrade writes the sentences back."""
    from game.stored_reasons import removal_reason
    from i18n import use_locale
    from service import voting

    outcomes = [  # (status, outcome)
        ("closed", "Option 1 won with 2 vote(s): it is turn #1."),
        ("closed", "Option 2 won with 1 vote(s), the earliest of 2 tied options: it is turn #2."),
        ("void", "The game was paused; this round is void and no turn was played."),
        ("void", "The game was reset or ended; this round is void and no turn was played."),
        ("void", "Voting was turned off in this channel; this round is void."),
        ("closed", "Nobody proposed an action: no turn this round."),
        ("open", None),
    ]
    ballots = {1: [2, 1, 0], 2: [0, 1, 1]}  # round -> votes per proposal, in proposal order
    removals = ["removed", "privacy: its author deleted their data", "spoilers: all of them", None]
    with fresh_database("agmig") as url:
        engine = make_engine(url)
        try:
            await upgrade(engine, "0015")
            async with engine.begin() as conn:
                gid = await conn.scalar(text("INSERT INTO game_sessions (guild_id, channel_id, film_id, status) "
                                             "VALUES (1, 1, 'qiqi', 'active') RETURNING id"))
                for seq, why in enumerate(removals, start=1):
                    await conn.execute(text(
                        "INSERT INTO turns (session_id, seq, author_id, author_name, characters, motion, background, "
                        "instruction, seed, status, removed_reason) "
                        "VALUES (:g, :seq, 3, 'alice', '{qiqi}', 'walk', 'town', 'walk', 1, 'done', :why)"),
                        {"g": gid, "seq": seq, "why": why})
                for rid, (status, outcome) in enumerate(outcomes, start=1):
                    await conn.execute(text(
                        "INSERT INTO vote_rounds (id, session_id, guild_id, channel_id, status, deadline, outcome) "
                        "VALUES (:r, :g, 1, 1, :s, now(), :o)"), {"r": rid, "g": gid, "s": status, "o": outcome})
                for rid, counts in ballots.items():
                    pids = []
                    for n, count in enumerate(counts):
                        pid = await conn.scalar(text(
                            "INSERT INTO vote_proposals (round_id, author_id, author_name, characters, character_names, "
                            "motion, background, instruction) VALUES (:r, :a, 'm', '{qiqi}', '{Qiqi}', 'walk', 'town', 'walk') "
                            "RETURNING id"), {"r": rid, "a": 10 + n})
                        pids.append(pid)
                        for voter in range(count):
                            await conn.execute(text("INSERT INTO vote_ballots (round_id, voter_id, proposal_id) VALUES (:r, :v, :p)"),
                                               {"r": rid, "v": 100 * rid + 10 * n + voter, "p": pid})
                    winner = pids[0] if rid == 1 else pids[1]
                    await conn.execute(text("UPDATE vote_rounds SET winner_id = :w, turn_id = (SELECT id FROM turns WHERE seq = :r) "
                                            "WHERE id = :r"), {"w": winner, "r": rid})
            await upgrade(engine, "0016")
            async with engine.connect() as conn:
                codes = list((await conn.scalars(text("SELECT outcome FROM vote_rounds ORDER BY id"))).all())
                removed = [tuple(r) for r in (await conn.execute(text(
                    "SELECT removed_reason, removed_note FROM turns ORDER BY seq"))).all()]
            assert codes == ["won", "won", "voided_pause", "voided_end", "voided_mode", "no_proposals", None]
            assert removed == [("removed", None), ("privacy_deleted", None), ("remover_words", "spoilers: all of them"),
                               (None, None)]
            async with AsyncSession(engine) as s:
                views = [await voting.view(s, rid) for rid in range(1, len(outcomes) + 1)]
            shown = [v.outcome_text() for v in views]
            assert shown == [
                "Option 1 won with 2 votes: it is turn #1.",
                "Option 2 won with 1 vote, the earliest of 2 tied options: it is turn #2.",
                *(o for _, o in outcomes[2:6]), ""]
            assert [str(removal_reason(*r) or "") for r in removed] == [w or "" for w in removals]
            with use_locale("ja"):
                assert views[2].outcome_text() == "ゲームが一時停止されたため、このラウンドは無効となり、ターンは行われませんでした。"
                assert views[0].outcome_text() == "案1が2票で選ばれました。ターン #1 になります。"
                assert [str(removal_reason(*r)) for r in removed[:3]] == [
                    "削除済み", "プライバシー：投稿者がデータを削除しました", "spoilers: all of them"]
            await downgrade(engine, "0015")
            async with engine.connect() as conn:
                back = list((await conn.scalars(text("SELECT outcome FROM vote_rounds ORDER BY id"))).all())
                reasons = list((await conn.scalars(text("SELECT removed_reason FROM turns ORDER BY seq"))).all())
            assert back == [o for _, o in outcomes] and reasons == removals
        finally:
            await engine.dispose()
