"""Hostile input through Discord (the real bot against the fake Discord): NUL and invisible
characters in reasons and names, names that are mention markup, numbers beyond the columns,
limits looser than the operator's. One table row per command, run in order on one game: each
states the ephemeral answer the member must get (never "Something went wrong") and, where
something is stored or announced, what it must be."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from db.models import AuditLog, GameSession, Player, Turn
from tests.bot.helpers import say

OPERATOR = {"cooldown_seconds": 15.0, "backlog_cap": 5, "max_instruction_len": 300}


@dataclass
class Row:
    name: str
    member: str  # an attribute of the world, or a member made for this test
    command: str
    options: dict
    answer: str  # a fragment of the ephemeral answer
    announced: str | None = None  # the exact channel message this row must produce
    stored: Callable[[Any], Any] | None = None  # async check of the database


async def paused_reason(sessions):
    """The live game's pause code and the moderator's words, kept apart (game.stored_reasons)."""
    async with sessions() as s:
        row = (await s.execute(select(GameSession.paused_reason, GameSession.paused_note)
                               .where(GameSession.status != "archived"))).one()
        return tuple(row)


async def player_names(sessions):
    async with sessions() as s:
        return sorted((await s.scalars(select(Player.user_name).where(Player.left_at.is_(None)))).all())


async def turn_rows(sessions):
    async with sessions() as s:
        return [(t.seq, t.status, t.author_name, t.instruction, t.error, t.cancelled_by_name, t.cancel_note)
                for t in (await s.scalars(select(Turn).order_by(Turn.seq))).all()]


ROWS = [
    Row("pause, reason with NUL", "dave", "mod pause", {"reason": "bad\x00rea\u202eson"}, "The game is paused.",
        "dave paused the game (badreason).", lambda ss: _eq(paused_reason(ss), ("moderator_words", "badreason"))),
    Row("act while paused", "alice", "act", {"motion": "walk", "background": "town"}, "This game is paused (badreason)."),
    Row("resume", "dave", "mod resume", {}, "The game is resumed."),
    Row("pause, reason only invisible", "dave", "mod pause", {"reason": "\u200b\u202e\x00"}, "The game is paused.",
        "dave paused the game.", lambda ss: _eq(paused_reason(ss), (None, None))),
    Row("resume again", "dave", "mod resume", {}, "The game is resumed."),
    Row("join as <@123>", "mention", "game join", {"character": "tombo"}, "You play Tombo.", "<\u200b@123> plays Tombo."),
    Row("join as @everyone", "everyone", "game join", {"character": "osono"}, "You play Osono.", "@\u200beveryone plays Osono."),
    Row("join with NUL and bidi in the name", "nul", "game join", {"character": "ursula"}, "You play Ursula.", "badname plays Ursula.",
        lambda ss: _eq(player_names(ss), ["<@123>", "@everyone", "alice", "badname"])),
    Row("join a character named as a mention", "carol", "game join", {"character": "<@123>"}, "is not a playable character here"),
    Row("start with a NUL film", "erin", "game start", {"film": "\x00"}, "Unknown film"),
    Row("act, motion only NUL", "mention", "act", {"motion": "\x00\x00", "background": "town"},
        "Your motion was refused: nothing usable is left"),
    Row("act, others a NUL", "mention", "act", {"motion": "walk", "background": "town", "with": "\x00"},
        "Your list of characters was refused"),
    Row("act, NUL inside the motion", "mention", "act", {"motion": "wa\x00lk", "background": "to\u200bwn"}, "Turn #1 is queued",
        stored=lambda ss: _eq(turn_rows(ss), [(1, "queued", "<@123>", "Character: Tombo; Motion: walk; Background: town.", None, None, None)])),
    Row("cancel turn 2^40", "dave", "mod cancel", {"turn": 2**40}, f"Turn {2**40} was not found in this game."),
    Row("cancel turn 2^53 - 1", "dave", "mod cancel", {"turn": 2**53 - 1}, f"Turn {2**53 - 1} was not found in this game."),
    Row("cancel with a NUL reason", "dave", "mod cancel", {"turn": 1, "reason": "spa\x00m"}, "Turn #1 is cancelled.",
        stored=lambda ss: _eq(turn_rows(ss), [(1, "cancelled", "<@123>", "Character: Tombo; Motion: walk; Background: town.",
                                             "cancelled_by_moderator", "dave", "spam")])),
    Row("kick <@123>", "dave", "mod kick", {"player": "mention"}, "<\u200b@123> no longer plays Tombo.",
        "dave removed <\u200b@123> from the game; Tombo is free to join."),
    Row("limits looser than the operator's", "erin", "admin limits", {"cooldown": 0, "backlog": 100, "max_length": 2000},
        "Limits: cooldown 15 s, backlog 5 turns, instructions up to 300 characters.\nThis bot's operator allows no looser limits"),
    Row("limits, one looser", "erin", "admin limits", {"backlog": 50}, "Limits: cooldown 15 s, backlog 5 turns"),
    Row("limits tighter", "erin", "admin limits", {"cooldown": 60, "backlog": 2, "max_length": 100},
        "Limits: cooldown 60 s, backlog 2 turns, instructions up to 100 characters."),
    Row("admin film NUL", "erin", "admin film", {"film": "qi\x00qi"}, "Unknown film"),
    Row("admin character mention markup", "erin", "admin character", {"character": "<@&1>", "enabled": False}, "is not a playable character"),
]


async def _eq(coro, expected) -> str | None:
    got = await coro
    return None if got == expected else f"stored {got!r}, wanted {expected!r}"


async def test_hostile_discord_commands(world, start_bot, sessions, qsettings):
    w, server = world, world.server
    await start_bot(settings=qsettings.model_copy(update=OPERATOR))
    members = {
        "mention": w.guild.create_member("<@123>"),
        "everyone": w.guild.create_member("@everyone"),
        "nul": w.guild.create_member("bad\x00na\u202eme"),
    }
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start")
    await say(w, w.alice, "game join", {"character": "qiqi"})

    wrong = []
    for row in ROWS:
        member = members.get(row.member) or getattr(w, row.member)
        options = {k: members.get(v, v) if isinstance(v, str) else v for k, v in row.options.items()}
        seen = len(server.channel_messages(w.games))
        text = await say(w, member, row.command, options)
        if "Something went wrong on our side" in text or row.answer not in text:
            wrong.append(f"{row.name}: answered {text!r}, wanted {row.answer!r}")
            continue
        if row.announced is not None:
            try:
                await server.wait_until(lambda row=row, seen=seen: any(m.content == row.announced for m in server.channel_messages(w.games)[seen:]),
                                        timeout=5, what=row.announced)
            except Exception:
                wrong.append(f"{row.name}: no channel message {row.announced!r}; got {[m.content for m in server.channel_messages(w.games)[seen:]]}")
        if row.stored is not None and (problem := await row.stored(sessions)):
            wrong.append(f"{row.name}: {problem}")
    assert not wrong, f"{len(wrong)} of {len(ROWS)} rows went wrong:\n" + "\n".join(wrong)

    # No channel message renders a mention or carries a control character.
    for m in server.channel_messages(w.games):
        assert "<@" not in m.content and "\x00" not in m.content, m.content
    # The audit log holds the cleaned texts (jsonb would refuse a NUL).
    async with sessions() as s:
        entries = (await s.scalars(select(AuditLog).order_by(AuditLog.id))).all()
    pauses = [e.details.get("reason") for e in entries if e.action == "pause"]
    assert pauses == ["badreason", ""]
