"""Driving the bot through the fake Discord and reading back what it answered."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile

from sqlalchemy import select
from sqlalchemy.orm import undefer

from db.models import AuditLog, Turn
from testkit.fake_discord import FakeMessage
from testkit.fake_discord.interactions import CHANNEL_MESSAGE, DEFERRED_CHANNEL_MESSAGE
from testkit.waits import wait_for


async def command(w, member, name: str, options: dict | None = None, channel=None):
    """Run a slash command; returns (handle, seconds from INTERACTION_CREATE to the first answer)."""
    h = await w.server.slash(w.guild, channel or w.games, member, name, options or {})
    first = await h.wait_response(timeout=5)
    return h, first.delay


async def answer(h, timeout: float = 15.0):
    """What the member saw: (text, embeds, ephemeral) of the direct answer or the first follow-up."""
    first = await h.wait_response(timeout=timeout)
    if first.type == CHANNEL_MESSAGE:
        return first.content or "", first.embeds, first.ephemeral
    assert first.type == DEFERRED_CHANNEL_MESSAGE, first
    m = await h.wait_followup(timeout=timeout)
    return m.content, m.embeds, m.ephemeral


async def say(w, member, name: str, options: dict | None = None, channel=None, timeout: float = 15.0) -> str:
    """Run a command and return the text of its (ephemeral) answer."""
    h, took = await command(w, member, name, options, channel)
    assert took < 3, f"{name} answered after {took:.2f} s"
    text, embeds, ephemeral = await answer(h, timeout)
    assert ephemeral, f"{name}: answers to a single member are ephemeral"
    return text


async def setup_game(w, *players, channel=None) -> None:
    """erin sets the guild's film (Qiqi), alice starts a game; each (member, character) joins it
    (default: alice plays qiqi)."""
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start", channel=channel)
    for member, character in players or [(w.alice, "qiqi")]:
        await say(w, member, "game join", {"character": character}, channel=channel)


def is_result(m: FakeMessage, seq: int | None = None) -> bool:
    """A posted turn (done or failed): it carries a Regenerate button."""
    if not any(c.startswith("ag:regen:") for c in m.custom_ids) or not m.embeds:
        return False
    return seq is None or m.embeds[0]["title"].split(" ")[1] == f"#{seq}"


async def result(w, seq: int, channel=None, timeout: float = 30.0) -> FakeMessage:
    return await w.server.wait_for_message(channel or w.games, lambda m: is_result(m, seq), timeout=timeout)


def results(w, channel=None) -> list[FakeMessage]:
    return [m for m in w.server.channel_messages(channel or w.games) if is_result(m)]


def turn_messages(w, seq: int, channel=None) -> list[FakeMessage]:
    """Every message of turn #seq in the channel (its status message, which becomes its post)."""
    return [
        m
        for m in w.server.channel_messages(channel or w.games)
        if m.embeds and re.match(rf"Turn #{seq}( |$)", m.embeds[0].get("title") or "")
    ]


def status_message(w, seq: int, channel=None) -> FakeMessage:
    """The turn's one message: queued, generating, then its post (or closed as cancelled)."""
    found = turn_messages(w, seq, channel)
    assert found, f"no status message for turn #{seq}"
    return found[-1]


async def closed_as(w, seq: int, state: str = "cancelled", channel=None, timeout: float = 10.0) -> FakeMessage:
    """The turn's status message once it is closed as `state` without buttons: the closing edit
    runs after the answer (it waits for the channel's edit budget, the answer does not)."""

    def closed():
        m = status_message(w, seq, channel)
        return m if m.embeds and m.embeds[0]["title"] == f"Turn #{seq} · {state}" and m.components == [] else None

    return await w.server.wait_until(closed, timeout, f"turn #{seq}'s message closed as {state}")


def edits_idle(bot) -> bool:
    """The bot has no message edit waiting or in flight, and its status board no task that could
    queue one: any edit it was going to make has reached the fake Discord. (The scheduler has no
    "idle" signal of its own; this reads its state.)"""
    channels = bot.edits._channels.values()
    return bot.edits.pending_count() == 0 and all(ch.task is None or ch.task.done() for ch in channels) and not bot.board._tasks


def modlog_idle(bot) -> bool:
    """The moderation log has no entry heard and unread, and no post waiting or on its way (read
    from its state: it has no "idle" signal of its own)."""
    log = bot.get_cog("ModLog").log
    boxes = log._outboxes.values()
    return log._entries.empty() and all(not b.pending and (b.task is None or b.task.done()) for b in boxes)


def patches_with_files(server) -> list:
    """Message edits that uploaded a file (posts: a status message edited into the turn's post)."""
    return [r for r in server.requests_to("PATCH", "/channels/{channel_id}/messages/{message_id}") if r.files]


def field(embed: dict, name: str) -> str:
    for f in embed.get("fields", []):
        if f["name"] == name:
            return f["value"]
    raise KeyError(f"{name} not in {[f['name'] for f in embed.get('fields', [])]}")


async def turns_of(sessions) -> list[Turn]:
    async with sessions() as s:
        return list((await s.scalars(select(Turn).order_by(Turn.session_id, Turn.seq).options(undefer(Turn.mp4)))).all())


async def audit_actions(sessions) -> list[tuple[str, str]]:
    async with sessions() as s:
        rows = (await s.scalars(select(AuditLog).order_by(AuditLog.id))).all()
    return [(r.action, r.actor_name) for r in rows]


async def posted_turns(sessions, n: int, timeout: float = 10.0) -> list[Turn]:
    """The turns once `n` of them are marked posted (the mark follows the message by a moment)."""

    async def ready():
        turns = await turns_of(sessions)
        return turns if sum(t.posted_at is not None for t in turns) >= n else None

    return await wait_for(ready, timeout=timeout, what=f"{n} turns posted")


def ffprobe_frames(data: bytes) -> int:
    """The number of video frames ffprobe decodes from an MP4's bytes."""
    with tempfile.NamedTemporaryFile(suffix=".mp4") as f:
        f.write(data)
        f.flush()
        out = subprocess.run(
            ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
             "stream=nb_read_frames", "-of", "json", f.name],
            capture_output=True, check=True,
        ).stdout
    return int(json.loads(out)["streams"][0]["nb_read_frames"])
