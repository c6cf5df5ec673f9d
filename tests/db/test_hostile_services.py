"""Hostile values handed straight to the game services (as any face, or a future one, might):
ids beyond 64 bits, turn numbers beyond 32, NUL, lone surrogates, bidi and zero-width characters
in free text. Each row says what must happen: a clear refusal (a GameError with a message), an
answer of "nothing there", or the value stored cleaned. No row may reach Postgres as a database
error, and every row runs in its own transaction, which must stay usable."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from db import audit, guilds, turn_reads, turn_results, turns
from db import sessions as gsess
from db.models import AuditLog, GameSession, Player, Turn
from game.catalogue import FILMS
from game.channel_config import Limits
from game.errors import GameError, OutOfRange
from game.instruction import build_instruction
from service import configs, refusals

QIQI = FILMS["qiqi"]
GUILD, CHANNEL = 100, 200
BIG, TOP = 2**64, 2**63  # beyond a bigint; one past its largest value
DIRTY = "bad\x00re\ud800a\u202eso\u200bn\x07"  # NUL, a lone surrogate, bidi, zero-width, BEL
CLEAN = "badreason"


@dataclass
class Ctx:
    s: Any
    gs: GameSession
    turn: Turn
    settings: Any


def ins():
    return build_instruction(QIQI, ["qiqi"], "walk", "town")


NOTHING = "nothing"  # None / an empty answer


async def _now(check, **values):
    """A check that needs no database, run as a row."""
    return check(**values)


@dataclass
class Row:
    name: str
    call: Callable[[Ctx], Awaitable[Any]]
    expect: Any  # a GameError type, NOTHING, or a check of the result / stored rows


async def _paused_reason(c: Ctx, _):
    await c.s.refresh(c.gs)
    return (c.gs.paused_reason, c.gs.paused_note) == ("moderator_words", CLEAN)


async def _player_name(c: Ctx, p):
    return p.user_name == CLEAN


async def _author_name(c: Ctx, t):
    return t.author_name == CLEAN


async def _turn_error(c: Ctx, t):
    return t.error == CLEAN


async def _audit(c: Ctx, row):
    return (row.actor_name, row.target, row.details) == (
        CLEAN, CLEAN, {"reason": CLEAN, "n": str(BIG), "f": "nan", "nested": [CLEAN, {"k": CLEAN}]},
    )


async def _progress(c: Ctx, _):
    await c.s.refresh(c.turn)
    return c.turn.progress_stage == CLEAN


async def _default_config(c: Ctx, cfg):
    return cfg.film is None and cfg.limits == Limits.of(c.settings)


ROWS = [
    # lookups with ids no row can have: nothing there
    Row("get_turn 2^63", lambda c: turn_reads.get_turn(c.s, TOP), NOTHING),
    Row("get_turn -2^64", lambda c: turn_reads.get_turn(c.s, -BIG), NOTHING),
    Row("get_turn 2^64 with blobs, locked", lambda c: turn_reads.get_turn(c.s, BIG, blobs=True, lock=True), NOTHING),
    Row("live_session 2^63", lambda c: gsess.live_session(c.s, TOP), NOTHING),
    Row("live_session 2^64, locked", lambda c: gsess.live_session(c.s, BIG, lock=True), NOTHING),
    Row("player_of 2^64", lambda c: gsess.player_of(c.s, c.gs.id, BIG), NOTHING),
    Row("turn_by_seq 2^31", lambda c: turn_reads.turn_by_seq(c.s, c.gs.id, 2**31), NOTHING),
    Row("turn_by_seq 2^40", lambda c: turn_reads.turn_by_seq(c.s, c.gs.id, 2**40), NOTHING),
    Row("turn_by_seq -2^63", lambda c: turn_reads.turn_by_seq(c.s, c.gs.id, -TOP - 1), NOTHING),
    Row("channel_config 2^64/2^64", lambda c: guilds.channel_config(c.s, c.settings, BIG, BIG), _default_config),
    # refusals with a message
    Row("live game of channel 2^64", lambda c: refusals.live_session(c.s, BIG), GameError),
    Row("join user 2^63", lambda c: gsess.join(c.s, c.gs, QIQI, TOP, "x", "tombo"), OutOfRange),
    Row("join user True", lambda c: gsess.join(c.s, c.gs, QIQI, True, "x", "tombo"), OutOfRange),
    Row("player 2^64", lambda c: refusals.player(c.s, c.gs, BIG), GameError),
    Row("insert_turn author 2^64", lambda c: turns.insert_turn(
        c.s, c.gs, author_id=BIG, author_name="x", instruction=ins(), enqueue=None), OutOfRange),
    Row("start_session guild 2^63", lambda c: gsess.start_session(c.s, TOP, 1, QIQI, created_by=1), OutOfRange),
    Row("start_session created_by 2^64", lambda c: gsess.start_session(c.s, 1, 1, QIQI, created_by=BIG), OutOfRange),
    Row("set_film guild 2^64", lambda c: guilds.set_film(c.s, BIG, "qiqi"), OutOfRange),
    Row("set_film channel 2^64", lambda c: guilds.set_film(c.s, GUILD, "qiqi", channel_id=BIG), OutOfRange),
    Row("set_playable channel 2^64", lambda c: guilds.set_playable(c.s, GUILD, BIG, ["jiji"]), OutOfRange),
    Row("set_roles role 2^64", lambda c: guilds.set_roles(c.s, GUILD, admin_role_ids=[BIG]), OutOfRange),
    Row("set_limits guild 2^64", lambda c: guilds.set_limits(c.s, c.settings, BIG, {"backlog_cap": 2}), OutOfRange),
    # the limits an admin asks for are checked before they reach a row (service.configs)
    Row("limit cooldown NaN", lambda c: _now(configs.limit_values, cooldown_seconds=math.nan), GameError),
    Row("limit cooldown inf", lambda c: _now(configs.limit_values, cooldown_seconds=math.inf), GameError),
    Row("limit backlog True", lambda c: _now(configs.limit_values, backlog_cap=True), GameError),
    Row("limit backlog 2^64", lambda c: _now(configs.limit_values, backlog_cap=BIG), GameError),
    Row("audit guild 2^64", lambda c: audit.record(c.s, guild_id=BIG, actor_id=1, actor_name="x", action="a"), OutOfRange),
    # free text: stored cleaned
    Row("set_paused reason with NUL", lambda c: gsess.set_paused(c.s, c.gs, True, note=DIRTY), _paused_reason),
    Row("join name with NUL", lambda c: gsess.join(c.s, c.gs, QIQI, 3, DIRTY, "tombo"), _player_name),
    Row("insert_turn author with NUL", lambda c: turns.insert_turn(
        c.s, c.gs, author_id=1, author_name=DIRTY, instruction=ins(), enqueue=None), _author_name),
    Row("cancel_turn reason with NUL", lambda c: turns.cancel_turn(c.s, c.turn, DIRTY), _turn_error),
    Row("record_progress stage with NUL", lambda c: turn_results.record_progress(c.s, c.turn.id, 0.5, DIRTY), _progress),
    Row("audit record, dirty everywhere", lambda c: audit.record(
        c.s, guild_id=GUILD, actor_id=1, actor_name=DIRTY, action="pause", target=DIRTY,
        details={"reason": DIRTY, "n": BIG, "f": math.nan, "nested": [DIRTY, {"k": DIRTY}]}), _audit),
]


async def _setup(sessions):
    async with sessions.begin() as s:
        gs = await gsess.start_session(s, GUILD, CHANNEL, QIQI, created_by=1)
        await gsess.join(s, gs, QIQI, 1, "alice", "qiqi")
        await gsess.join(s, gs, QIQI, 2, "bob", "jiji")
        turn = await turns.insert_turn(s, gs, author_id=2, author_name="bob", instruction=build_instruction(QIQI, ["jiji"], "walk", "town"),
                                       enqueue=None)
    return gs.id, turn.id


async def test_hostile_values_at_the_services(sessions, settings):
    wrong = []
    for row in ROWS:
        # A fresh game per row, so rows do not see each other's effects.
        async with sessions.begin() as s:
            for t in ("audit_log", "turns", "players", "character_states", "game_sessions", "guild_settings", "channel_settings"):
                await s.execute(text(f"DELETE FROM {t}"))
        gs_id, turn_id = await _setup(sessions)
        try:
            async with sessions.begin() as s:
                gs, turn = await s.get(GameSession, gs_id), await s.get(Turn, turn_id)
                if row.name.startswith("record_progress"):
                    turn.status = "running"
                    await s.flush()
                c = Ctx(s, gs, turn, settings)
                result = await row.call(c)
                if isinstance(row.expect, type):
                    wrong.append(f"{row.name}: no refusal, got {result!r}")
                elif row.expect is NOTHING:
                    if result is not None:
                        wrong.append(f"{row.name}: found {result!r}")
                else:
                    await s.flush()
                    if isinstance(result, AuditLog | Player | Turn):
                        await s.refresh(result)
                    if not await row.expect(c, result):
                        wrong.append(f"{row.name}: stored {result!r} uncleaned")
        except DBAPIError as e:
            wrong.append(f"{row.name}: a database error: {e.orig!r}")
        except GameError as e:
            if not (isinstance(row.expect, type) and isinstance(e, row.expect)):
                wrong.append(f"{row.name}: refused with {type(e).__name__}: {e.message}")
            elif not e.message.strip():
                wrong.append(f"{row.name}: a refusal without a message")
        except Exception as e:  # anything else is a crash
            wrong.append(f"{row.name}: crashed with {type(e).__name__}: {e}")
        # The connection is still usable after the row.
        async with sessions() as s:
            assert (await s.get(GameSession, gs_id)) is not None
    assert not wrong, f"{len(wrong)} of {len(ROWS)} rows went wrong:\n" + "\n".join(wrong)
    assert len(ROWS) >= 30

    # Nothing stored anywhere holds a control or invisible character.
    async with sessions() as s:
        texts = [*(await s.scalars(select(Player.user_name))).all(), *(await s.scalars(select(Turn.author_name))).all()]
    assert all(t.isprintable() for t in texts), texts


@pytest.mark.parametrize("text,expected", [
    ("plain", "plain"), ("\x00", ""), ("a\ud800b", "ab"), ("\u202eevil", "evil"), ("a\u200b\u200db", "ab"),
    ("  many   spaces\n\tand lines ", "many spaces and lines"), ("ｆｕｌｌ", "full"), ("x" * 500, "x" * 100),
])
def test_clean_text(text, expected):
    from game.sanitize import clean_text

    assert clean_text(text, 100) == expected
