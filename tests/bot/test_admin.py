"""/admin: film, cast, limits and roles; rights checked by the bot; every change audited."""

from __future__ import annotations

import discord

from service import shares
from tests.bot.helpers import answer, audit_actions, command, say, turns_of

RIGHTS = "You need the Manage Server permission or the bot's admin role"


async def test_admin_commands_and_refusals(world, start_bot, sessions):
    w, server = world, world.server
    await start_bot()  # no worker: turns stay queued, which the limits need

    # Discord's hint, and the bot's own check for whoever the server lets through anyway
    assert str(server.command("admin")["default_member_permissions"]) == str(discord.Permissions(manage_guild=True).value)
    assert str(server.command("mod")["default_member_permissions"]) == str(discord.Permissions(manage_messages=True).value)
    for name, options in (
        ("admin film", {"film": "qiqi"}),
        ("admin character", {"character": "tombo", "enabled": False}),
        ("admin limits", {"backlog": 1}),
        ("admin role", {"kind": "admin", "role": w.admin_role}),
        ("admin show", {}),
    ):
        assert RIGHTS in await say(w, w.carol, name, options), name
        assert RIGHTS in await say(w, w.dave, name, options), name  # a moderator is not an admin
    assert await audit_actions(sessions) == []

    ac = await server.autocomplete(w.guild, w.games, w.erin, "admin film", {"film": "pon"}, focused="film")
    assert (await ac.wait_response()).choices == [{"name": "Ponyo on the Cliff by the Sea", "value": "ponyo"}]
    assert "now plays Kiki" in await say(w, w.erin, "admin film", {"film": "qiqi"})
    assert "Unknown film 'totoro'" in await say(w, w.erin, "admin film", {"film": "totoro"})
    assert "This channel now plays Ponyo" in await say(w, w.owner, "admin film", {"film": "ponyo", "scope": "channel"}, channel=w.games2)

    text = await say(w, w.erin, "admin character", {"character": "tombo", "enabled": False})
    assert text == "Playable here now: Qiqi, Jiji, Osono, Ursula."
    assert "not a playable character" in await say(w, w.erin, "admin character", {"character": "sosuke", "enabled": True})
    # the cast of the other channel (its own film) is untouched
    assert "Sosuke" in await say(w, w.erin, "admin character", {"character": "lisa", "enabled": False}, channel=w.games2)

    assert "This channel plays Kiki's" in await say(w, w.alice, "game start", {"film": "ponyo"})
    await say(w, w.alice, "game start")
    assert "'tombo' is not a playable character here" in await say(w, w.alice, "game join", {"character": "tombo"})
    ac = await server.autocomplete(w.guild, w.games, w.alice, "game join", {"character": "t"}, focused="character")
    assert (await ac.wait_response()).choices == []
    await say(w, w.alice, "game join", {"character": "qiqi"})
    await say(w, w.bob, "game join", {"character": "jiji"})

    assert "backlog 1 turn," in await say(w, w.erin, "admin limits", {"backlog": 1, "cooldown": 30})
    assert "is queued" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    assert "already has 1 turn waiting" in await say(w, w.bob, "act", {"motion": "walk", "background": "town"})
    await say(w, w.erin, "admin limits", {"backlog": 5})
    text = await say(w, w.alice, "act", {"motion": "run", "background": "town"})
    assert text.startswith("Slow down: you can act again in ") and 25 <= int(text.split()[-2]) <= 30
    assert len(await turns_of(sessions)) == 1  # refusals write nothing
    # the operator's hourly quota for this server (service.shares; `animegamer shares set`)
    await shares.set_share(sessions, w.guild.id, "operator", turns_per_hour=1)
    text = await say(w, w.bob, "act", {"motion": "run", "background": "town"})
    assert text.startswith("This server has played its 1 turn of the past hour; its next turn is possible in ")

    # roles: a role with no Discord permission gets the bot's admin rights
    assert RIGHTS in await say(w, w.carol, "admin show")
    assert "Game Admins now has the bot's admin rights" in await say(w, w.erin, "admin role", {"kind": "admin", "role": w.admin_role})
    w.carol.add_role(w.admin_role)
    h, _ = await command(w, w.carol, "admin show")
    _, embeds, ephemeral = await answer(h)
    assert ephemeral and embeds[0]["fields"][0]["value"].startswith("Kiki")
    assert f"<@&{w.admin_role.id}>" in [f["value"] for f in embeds[0]["fields"] if f["name"] == "Admin roles"][0]
    share = [f["value"] for f in embeds[0]["fields"] if f["name"] == "Share of the GPU"][0]
    assert share == "weight 1 · 1 turn an hour for the server · no hourly quota for each member · 1 turn in the last hour"
    assert [f["value"] for f in embeds[0]["fields"] if f["name"].startswith("Usage")] == ["none"]  # no worker ran a turn
    assert "Game Mods now has the bot's moderator rights" in await say(w, w.carol, "admin role", {"kind": "moderator", "role": w.mod_role})
    assert "no longer has" in await say(w, w.erin, "admin role", {"kind": "admin", "role": w.admin_role, "enabled": False})
    assert RIGHTS in await say(w, w.carol, "admin show")

    assert await audit_actions(sessions) == [
        ("set_film", "erin"),
        ("set_film", w.owner.user.username),
        ("disable_character", "erin"),
        ("disable_character", "erin"),
        ("set_limits", "erin"),
        ("set_limits", "erin"),
        ("add_admin_role", "erin"),
        ("add_moderator_role", "carol"),
        ("remove_admin_role", "erin"),
    ]
    assert server.unhandled == []
