"""/help for each kind of member, /admin show without bare ids, /games and past games'
/history and /export after a reset."""

from __future__ import annotations

import re

from tests.bot.helpers import answer, command, ffprobe_frames, field, is_result, result, say


async def embed_of(w, member, name: str, options: dict | None = None, channel=None) -> dict:
    h, took = await command(w, member, name, options, channel)
    assert took < 3
    _, embeds, ephemeral = await answer(h)
    assert ephemeral and len(embeds) == 1, (name, embeds)
    return embeds[0]


def text_of(embed: dict) -> str:
    parts = [embed.get("title", ""), embed.get("description", ""), embed.get("footer", {}).get("text", "")]
    parts += [f"{f['name']}\n{f['value']}" for f in embed.get("fields", [])]
    return "\n".join(parts)


def embed_size(embed: dict) -> int:
    """What Discord counts against its 6000-character embed limit."""
    return sum(len(embed.get(k, "")) for k in ("title", "description")) + len(embed.get("footer", {}).get("text", "")) + sum(
        len(f["name"]) + len(f["value"]) for f in embed.get("fields", [])
    )


async def test_help_lists_what_each_member_may_use_with_the_films_examples(world, start_bot):
    w = world
    await start_bot()

    # No film yet: the default film's words, and only the players' commands for carol.
    e = await embed_of(w, w.carol, "help")
    body = text_of(e)
    assert "as a player" in e["description"] and "No film is chosen here yet" in e["description"]
    assert "`/act`" in body and "e.g. `/act motion:fly on broomstick background:sky" in body
    assert "`/game join`" in body and "character:Qiqi" in body
    assert "`/games`" in body and "`/help`" in body
    assert "`/mod" not in body and "`/admin" not in body and "`/vote mode`" not in body
    assert "`/vote propose`" not in body  # not a vote channel: it would be refused
    assert [f["name"] for f in e["fields"]][0] == "Playing"

    # A channel of its own film: the examples follow it.
    await say(w, w.erin, "admin film", {"film": "ponyo", "scope": "channel"}, channel=w.games2)
    e = await embed_of(w, w.dave, "help", channel=w.games2)
    body = text_of(e)
    assert e["title"] == "AnimeGamer · Ponyo on the Cliff by the Sea" and "as a moderator" in e["description"]
    assert "character:Ponyo" in body and "`/mod pause`" in body and "`/mod kick`" in body
    assert "`/admin" not in body

    e = await embed_of(w, w.erin, "help", channel=w.games2)
    body = text_of(e)
    assert "as an admin" in e["description"] and "`/admin film film:ponyo`" in body and "`/vote mode`" in body
    assert embed_size(e) < 6000 and all(len(f["value"]) <= 1024 for f in e["fields"])

    # Vote mode: /act is replaced by /vote propose for everyone.
    await say(w, w.erin, "vote mode", {"enabled": True}, channel=w.games2)
    body = text_of(await embed_of(w, w.carol, "help", channel=w.games2))
    assert "plays by vote" in body and "`/vote propose`" in body and "`/act`" not in body
    assert w.server.unhandled == []


SNOWFLAKE_OUTSIDE_MENTION = re.compile(r"(?<![@&#\d:])\d{15,}")


async def test_admin_show_renders_names_and_mentions_not_raw_ids(world, start_bot):
    w = world
    await start_bot()
    sneaky = w.guild.create_role("**Mods** @everyone")
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.erin, "admin role", {"kind": "moderator", "role": sneaky})
    await say(w, w.erin, "admin limits", {"cooldown": 30, "backlog": 2})
    await say(w, w.alice, "game start")
    await say(w, w.bob, "game join", {"character": "jiji"})
    await say(w, w.dave, "mod kick", {"player": w.bob})
    await say(w, w.dave, "mod pause", {"reason": "_tea_ <@&123456789012345678>"})

    e = await embed_of(w, w.erin, "admin show")
    recent = field(e, "Recent actions")
    lines = recent.splitlines()
    assert len(lines) == 5
    kick, pause = lines[1], lines[0]  # newest first
    assert f"<@{w.dave.id}> (dave) removed <@{w.bob.id}> (bob) from the game in <#{w.games.id}>" in kick
    assert re.match(r"<t:\d+:R> ", kick)
    assert "paused the game (\\_tea\\_ <@\u200b&123456789012345678>)" in pause  # typed text: no Markdown, no mention
    assert f"gave the bot's moderator rights to <@&{sneaky.id}> (\\*\\*Mods\\*\\* @\u200beveryone)" in recent
    assert "set the limits (cooldown 30 s, backlog 2)" in recent
    assert "set the film to Kiki's Delivery Service" in recent
    assert not SNOWFLAKE_OUTSIDE_MENTION.search(recent), recent
    assert w.server.unhandled == []


async def test_games_and_a_past_games_history_and_export(world, start_bot, start_worker):
    w = world
    await start_bot()
    await start_worker(films=["qiqi"])
    assert "No game has been played here yet" in (await embed_of(w, w.carol, "games"))["description"]

    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start")
    await say(w, w.alice, "game join", {"character": "qiqi"})
    await say(w, w.alice, "act", {"motion": "fly on broomstick", "background": "sky"})
    first = await result(w, 1)
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    second = await result(w, 2)
    await say(w, w.dave, "mod reset")
    await say(w, w.alice, "act", {"motion": "run", "background": "bakery"})
    await w.server.wait_for_message(w.games, lambda m: is_result(m, 1), after=second, timeout=30)

    e = await embed_of(w, w.carol, "games")
    lines = e["description"].splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("**Game 1** · Kiki's Delivery Service (Qiqi's Delivery Service) · 2 turns, 2 shots") and lines[0].endswith("archived")
    assert lines[1].startswith("**Game 2** · Kiki's Delivery Service (Qiqi's Delivery Service) · 1 turn, 1 shot") and lines[1].endswith("current")
    assert "/history game:N" in e["footer"]["text"]

    # The current game by default, the archived one by its number.
    now = await embed_of(w, w.carol, "history")
    assert "run" in now["description"] and "fly on broomstick" not in now["description"]
    past = await embed_of(w, w.carol, "history", {"game": 1})
    assert past["title"].endswith("· game 1")
    assert "**#1** alice · done" in past["description"] and "**#2** alice · done" in past["description"]
    assert "fly on broomstick" in past["description"] and "run" not in past["description"]
    assert "no game 3 (games 1 to 2)" in await say(w, w.carol, "history", {"game": 3})
    assert "no game 1 (no games yet)" in await say(w, w.carol, "history", {"game": 1}, channel=w.games2)

    h, _ = await command(w, w.carol, "export", {"game": 1})
    m = await h.wait_followup(timeout=60)
    assert m.ephemeral and "2 shots, turns #1 to #2" in m.content
    assert ffprobe_frames(m.attachments[0].data) == 2 * ffprobe_frames(first.attachments[0].data)  # both shots of the archived game, stitched
    assert w.server.unhandled == []
