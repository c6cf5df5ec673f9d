"""The moderation log channel (/admin log-channel): every audited action reaches it as an embed
(admin and moderator actions, refused instructions, removed and reported shots), posted in the
background; "Report shot" sends a shot there with a jump link, once a minute per member, and says
so clearly when the server has no log channel."""

from __future__ import annotations

import re

from bot.parts.embeds import esc
from db import audit
from inference.backends.preview import PreviewBackend
from service import modlog as service_modlog
from testkit.waits import wait_for
from tests.bot.helpers import field, result, say, setup_game
from tests.bot.test_removal import menu


def log_embeds(w, channel) -> list[dict]:
    return [m.embeds[0] for m in w.server.channel_messages(channel) if m.embeds]


async def logged(w, channel, title: str, count: int = 1, timeout: float = 10.0) -> dict:
    """The latest log embed titled `title`, once `count` of them are there."""

    def found():
        hits = [e for e in log_embeds(w, channel) if e["title"] == title]
        return hits[-1] if len(hits) >= count else None

    return await w.server.wait_until(found, timeout, f"{count} x {title!r} in the log")


def _spy(monkeypatch, bot) -> tuple[list[int], list[str]]:
    """(the audit ids the moderation log has read, in order; the titles it handed to its outbox)."""
    read: list[int] = []
    sent: list[str] = []
    log = bot.get_cog("ModLog").log
    to_post, send = service_modlog.to_post, log.send

    async def reading(game, audit_id):
        read.append(audit_id)
        return await to_post(game, audit_id)

    def sending(channel_id, guild_id, embed):
        sent.append(embed.title)
        send(channel_id, guild_id, embed)

    monkeypatch.setattr(service_modlog, "to_post", reading)
    monkeypatch.setattr(log, "send", sending)
    return read, sent


async def test_the_log_gets_actions_refusals_removals_and_reports(world, start_bot, start_worker, sessions, monkeypatch):
    w = world
    log = w.guild.create_text_channel("mod-log")
    bot = await start_bot()
    read, sent = _spy(monkeypatch, bot)
    await start_worker(films=["qiqi"], backend=PreviewBackend(width=96, height=64))
    await setup_game(w, (w.alice, "qiqi"), (w.bob, "jiji"))
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    post = await result(w, 1)

    # No log channel yet: a report says why, and nothing is recorded.
    assert "no moderation log channel" in await menu(w, post, w.carol, "Report shot")
    assert "You need" in await say(w, w.dave, "admin log-channel", {"channel": log})  # a moderator is no admin
    assert "now goes to <#" in await say(w, w.erin, "admin log-channel", {"channel": log})
    first = await logged(w, log, "Log channel")
    assert f"set the moderation log to <#{log.id}>" in first["description"] and "erin" in first["description"]

    await say(w, w.dave, "mod pause", {"reason": "dinner"})
    await say(w, w.dave, "mod resume")
    e = await logged(w, log, "Pause")
    assert f"<@{w.dave.id}> (dave) paused the game (dinner)" in e["description"]
    await logged(w, log, "Resume")

    # Reports: a jump link to the post; one per member per minute; other members are not held up.
    assert "turn #1 by alice was sent to the moderators" in await menu(w, post, w.carol, "Report shot")
    e = await logged(w, log, "Shot reported")
    assert f"https://discord.com/channels/{w.guild.id}/{w.games.id}/{post.id}" in field(e, "Shot")
    assert f"<@{w.alice.id}> (alice)" in field(e, "Its author") and f"<@{w.carol.id}> (carol)" in e["description"]
    again = re.search(r"you can report again in (\d+) s", await menu(w, post, w.carol, "Report shot"))
    assert again and 50 <= int(again.group(1)) <= 60
    assert "sent to the moderators" in await menu(w, post, w.bob, "Report shot")
    await logged(w, log, "Shot reported", count=2)
    chat = await w.server.user_message(w.games, w.bob, "hello")
    assert "not one of this server's game shots" in await menu(w, chat, w.owner, "Report shot")

    # A removal, with its reason and a link to the post it replaced.
    await say(w, w.dave, "mod remove", {"turn": 1, "reason": "spoilers"})
    e = await logged(w, log, "Shot removed")
    assert field(e, "Reason") == "spoilers" and str(post.id) in field(e, "Shot")
    assert "already removed" in await menu(w, post, w.owner, "Report shot")

    # A refused instruction as the content rules record it: who, which rule set, the text hidden.
    text = "dragon || @everyone <@1> *dance*"
    async with sessions.begin() as s:
        await audit.record(s, guild_id=w.guild.id, channel_id=w.games.id, actor_id=w.bob.id, actor_name="bob",
                           action="instruction_refused", target="/act",
                           details={"rule_set": "this server's filter", "term": "dragon", "text": text})
    e = await logged(w, log, "Instruction refused")
    assert field(e, "Member") == f"<@{w.bob.id}> (bob)" and field(e, "Rule set") == "this server's filter"
    assert field(e, "Text") == f"||{esc(text)}||" and "\\|\\|" in field(e, "Text")
    # An entry rolled back never reaches the log.
    try:
        async with sessions.begin() as s:
            await audit.record(s, guild_id=w.guild.id, actor_id=w.bob.id, actor_name="bob", action="rolled_back")
            raise RuntimeError("roll back")
    except RuntimeError:
        pass

    # Turned off: nothing more is posted, and reports say why.
    assert "The moderation log is off" in await say(w, w.erin, "admin log-channel")
    assert "no longer plays" in await say(w, w.dave, "mod kick", {"player": w.bob})
    await say(w, w.alice, "act", {"motion": "run", "background": "town"})
    post2 = await result(w, 2)
    assert "no moderation log channel" in await menu(w, post2, w.owner, "Report shot")
    # A marker entry after all of them: the log reads entries in the order they were committed, so
    # once it has read the marker, it has handled (and not sent) every entry before it.
    async with sessions.begin() as s:
        marker = (await audit.record(s, guild_id=w.guild.id, actor_id=w.bob.id, actor_name="bob", action="test_marker")).id
    await wait_for(lambda: marker in read, timeout=10, what="the moderation log read the marker entry")
    expected = ["Log channel", "Pause", "Resume", "Shot reported", "Shot reported", "Shot removed", "Instruction refused"]
    assert sent == expected
    await w.server.wait_until(lambda: len(log_embeds(w, log)) == len(expected), 10, "every sent entry in the log channel")
    assert [e["title"] for e in log_embeds(w, log)] == expected


async def test_a_log_channel_the_bot_cannot_post_in_is_refused(world, start_bot):
    w = world
    hidden = w.guild.create_text_channel("hidden")
    hidden.set_overwrite(w.guild.me, deny=1 << 11)  # Send Messages denied to the bot
    await start_bot()
    text = await say(w, w.erin, "admin log-channel", {"channel": hidden})
    # (Discord drops Embed Links with Send Messages)
    assert f"I cannot post in <#{hidden.id}>: I need Send Messages and Embed Links there. Give me those permissions" in text


async def test_a_burst_of_entries_keeps_its_order_within_the_channels_budget(world, start_bot, sessions):
    w = world
    log = w.guild.create_text_channel("mod-log")
    await start_bot()
    await say(w, w.erin, "admin log-channel", {"channel": log})
    await logged(w, log, "Log channel")
    for i in range(9):  # nine actions committed at once, as a busy server's moderators might
        async with sessions.begin() as s:
            await audit.record(s, guild_id=w.guild.id, actor_id=w.dave.id, actor_name="dave", action="pause",
                               details={"reason": f"burst {i}"})
    await logged(w, log, "Pause", count=9, timeout=30)
    reasons = [e["description"].rsplit("(", 1)[-1] for e in log_embeds(w, log) if e["title"] == "Pause"]
    assert reasons == [f"burst {i})" for i in range(9)]
    sent = sorted(r.at for r in w.server.requests_to("POST", "/channels/{channel_id}/messages")
                  if r.params.get("channel_id") == str(log.id))
    assert len(sent) == 10
    assert max(sum(1 for t in sent if start <= t < start + 5.0) for start in sent) <= 5
