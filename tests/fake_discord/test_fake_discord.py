"""The real discord.py client (commands.Bot + app-command tree) against FakeDiscord: slash commands,
deferred answers and follow-ups, files, autocomplete, components and Discord's error codes."""

from __future__ import annotations

import io

import aiohttp
import discord
import pytest

from testkit.fake_discord import FakeDiscord
from testkit.fake_discord.tinybot import CLIP, JoinView, ModeSelect, TinyBot, World


async def test_login_ready_and_guild_create_fill_the_cache(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    assert bot.user.id == fake_discord.bot_user.id and bot.user.bot
    assert bot.application_id == fake_discord.application_id
    guild = bot.get_guild(world.guild.id)
    assert guild is not None and guild.name == "AnimeGamer Test"
    assert guild.owner_id == world.guild.owner_id
    assert {c.name for c in guild.text_channels} == {"general", "games"}
    assert guild.get_channel(world.games.id).topic == "play here"
    assert {"@everyone", "Mods", "Admins", "Managers", "AnimeGamer"} <= {r.name for r in guild.roles}
    admin = guild.get_member(world.admin.id)
    assert admin is not None and admin.guild_permissions.administrator
    assert [r.name for r in guild.get_member(world.mod.id).roles] == ["@everyone", "Mods"]
    assert guild.me.guild_permissions.send_messages and guild.me.guild_permissions.attach_files
    assert guild.get_member(world.guild.owner_id) is not None
    # The first requests are login: /users/@me and the application.
    assert [r.path for r in fake_discord.requests[:2]] == ["/users/@me", "/oauth2/applications/@me"]
    connect = next(e for e in fake_discord.gateway.log if e[0] == "connect")
    assert connect[1]["v"] == "10" and connect[1]["encoding"] == "json"
    shards, url, _ = await bot.http.get_bot_gateway()  # what AutoShardedClient asks
    assert (shards, url) == (1, fake_discord.gateway_url)
    assert fake_discord.unhandled == []
    # Dispatches carry consecutive sequence numbers within the session.
    (session,) = fake_discord.gateway.sessions.values()
    assert [f["s"] for f in session.buffer] == list(range(1, len(session.buffer) + 1))
    assert [f["t"] for f in session.buffer[:2]] == ["READY", "GUILD_CREATE"]


async def test_tree_sync_is_recorded(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    game = fake_discord.command("game")
    subs = {o["name"]: o for o in game["options"]}
    assert set(subs) == {"start", "render", "play", "slow", "pick", "upload"}
    start_opts = {o["name"]: o for o in subs["start"]["options"]}
    assert start_opts["title"]["required"] and start_opts["title"]["type"] == 3
    assert start_opts["rounds"]["min_value"] == 1 and start_opts["rounds"]["max_value"] == 10
    assert subs["pick"]["options"][0]["autocomplete"] is True
    assert fake_discord.requests_to("PUT", "/applications/{application_id}/commands")[-1].status == 200

    # Guild sync goes to its own store and wins over the global command for that guild.
    bot.tree.copy_global_to(guild=discord.Object(world.guild.id))
    synced = await bot.tree.sync(guild=discord.Object(world.guild.id))
    assert [c.name for c in synced] == ["game"] and synced[0].guild_id == world.guild.id
    assert fake_discord.command("game", world.guild)["guild_id"] == str(world.guild.id)
    handle = await fake_discord.slash(world.guild, world.general, world.alice, "game pick", {"character": "Rei"})
    assert handle.payload["data"]["guild_id"] == str(world.guild.id)
    assert (await handle.wait_response()).content == "picked Rei"


async def test_slash_command_gets_options_and_member_permissions(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    handle = await fake_discord.slash(
        world.guild,
        world.games,
        world.manager,
        "game start",
        {"title": "Sakura", "rounds": 5, "fast": True, "rival": world.alice},
    )
    response = await handle.wait_response()
    assert response.type == 4 and response.content == "Starting Sakura (5 rounds)"
    call = bot.rec.calls[-1]
    assert (call["title"], call["rounds"], call["fast"]) == ("Sakura", 5, True)
    assert isinstance(call["rival"], discord.Member) and call["rival"].id == world.alice.id
    assert call["roles"] == ["@everyone", "Managers"]
    assert call["manage_guild"] and not call["administrator"] and not call["manage_messages"]
    assert call["filesize_limit"] == world.guild.upload_limit
    assert call["channel"].id == world.games.id
    # The response is a real message in the channel, tied to the interaction.
    msg = await fake_discord.wait_for_message(world.games, lambda m: m.content.startswith("Starting"))
    assert msg is handle.original and msg.interaction_metadata["name"] == "game"

    for member, expected in [(world.alice, (False, False)), (world.admin, (True, True)), (world.mod, (False, False))]:
        h = await fake_discord.slash(world.guild, world.general, member, "game start", {"title": "x"})
        await h.wait_response()
        call = bot.rec.calls[-1]
        assert (call["administrator"], call["manage_guild"]) == expected, member.user.username
        assert call["rounds"] == 3 and call["fast"] is False  # defaults when options are omitted
    assert bot.rec.calls[-1]["manage_messages"] is True
    h = await fake_discord.slash(world.guild, world.general, world.guild.owner, "game start", {"title": "x"})
    await h.wait_response()
    assert bot.rec.calls[-1]["is_owner"] and bot.rec.calls[-1]["administrator"]

    with pytest.raises(ValueError, match="missing required"):
        await fake_discord.slash(world.guild, world.general, world.alice, "game start", {})
    with pytest.raises(LookupError, match="no option"):
        await fake_discord.slash(world.guild, world.general, world.alice, "game start", {"title": "x", "bogus": 1})
    with pytest.raises(ValueError, match="outside"):
        await fake_discord.slash(world.guild, world.general, world.alice, "game start", {"title": "x", "rounds": 11})
    with pytest.raises(LookupError, match="is a group"):
        await fake_discord.slash(world.guild, world.general, world.alice, "game")


async def test_defer_then_followup_with_attachment(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    handle = await fake_discord.slash(world.guild, world.general, world.alice, "game render")
    response = await handle.wait_response()
    assert response.type == 5
    followup = await handle.wait_followup()
    assert followup.content == "clip ready"
    assert [(a.filename, a.data) for a in followup.attachments] == [("clip.mp4", CLIP)]
    req = fake_discord.requests_to("POST", "/webhooks/{application_id}/{token}")[-1]
    assert req.query["wait"] == "1" and req.json["content"] == "clip ready"
    assert [f.filename for f in req.files] == ["clip.mp4"]
    # The deferred placeholder is still "thinking": a follow-up does not replace it.
    assert handle.original.loading


async def test_defer_then_channel_send_then_edit_original(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    """The flow the package docstring shows."""
    handle = await fake_discord.slash(world.guild, world.games, world.alice, "game play", {"title": "Sakura"})
    first = await handle.wait_response()
    assert first.type == 5
    msg = await fake_discord.wait_for_message(world.games, lambda m: "Sakura" in m.content, timeout=5)
    assert msg.source == "channel" and msg.attachments[0].data.startswith(b"\x00\x00")
    original = await handle.wait_original()
    assert original.content == "turn posted" and original.edit_count == 1
    assert [m.content for m in fake_discord.channel_messages(world.games)] == ["turn posted", "Sakura: turn 1"]


async def test_attachment_option_is_resolved_and_downloadable(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    image = fake_discord.make_attachment("ref.png", b"\x89PNG fake", content_type="image/png")
    handle = await fake_discord.slash(world.guild, world.general, world.alice, "game upload", {"image": image})
    response = await handle.wait_response()
    assert response.ephemeral and response.content == "got ref.png (9 bytes)"
    assert bot.rec.calls[-1]["data"] == b"\x89PNG fake"
    assert fake_discord.channel_messages(world.general) == []  # ephemeral: not in the channel


async def test_channel_send_file_embed_and_edit_counting(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    channel = bot.get_channel(world.games.id)
    embed = discord.Embed(title="Round 1", description="Fight!")
    sent = await channel.send("round start", embed=embed, file=discord.File(io.BytesIO(b"frame"), "frame.png"))
    stored = fake_discord.messages[sent.id]
    assert stored.content == "round start" and stored.embeds[0]["title"] == "Round 1"
    assert [(a.filename, a.data, a.content_type) for a in stored.attachments] == [("frame.png", b"frame", "image/png")]
    assert sent.attachments[0].filename == "frame.png" and await sent.attachments[0].read() == b"frame"
    req = fake_discord.requests_to("POST", "/channels/{channel_id}/messages")[-1]
    assert req.json["embeds"][0]["description"] == "Fight!" and req.headers["Content-Type"].startswith("multipart/")

    for i in range(3):
        sent = await sent.edit(content=f"progress {i}")
    stored = await fake_discord.wait_for_edits(sent, 3)
    assert stored.edit_count == 3 and stored.content == "progress 2"
    assert stored.embeds[0]["title"] == "Round 1"  # fields not in the PATCH are kept
    assert [e["body"]["content"] for e in stored.edits] == ["progress 0", "progress 1", "progress 2"]
    fetched = await channel.fetch_message(sent.id)
    assert fetched.content == "progress 2" and fetched.edited_at is not None

    await sent.delete()
    assert stored.deleted and fake_discord.channel_messages(world.games) == []


async def test_autocomplete_results(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    handle = await fake_discord.autocomplete(
        world.guild, world.general, world.alice, "game pick", {"character": "ak"}, focused="character"
    )
    response = await handle.wait_response()
    assert response.type == 8
    assert response.choices == [{"name": "Akira", "value": "Akira"}, {"name": "Akane", "value": "Akane"}]


async def test_button_click_reaches_persistent_view(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    # A message the bot posted before a restart: only the persistent view (added in setup_hook) can answer.
    view = JoinView(bot.rec)
    posted = fake_discord.post_message(world.games, content="Lobby open", components=view.to_components())
    handle = await fake_discord.click(posted, world.alice, "game:join")
    response = await handle.wait_response()
    assert response.type == 7 and response.content == "alice joined"
    assert bot.rec.calls[-1] == {"cmd": "join", "user": world.alice.id, "message": posted.id}
    assert posted.content == "alice joined" and posted.edit_count == 1
    with pytest.raises(ValueError, match="no component"):
        await fake_discord.click(posted, world.alice, "nope")

    handle = await fake_discord.click(posted, world.mod, "game:leave")
    assert (await handle.wait_response()).type == 6
    followup = await handle.wait_followup()
    assert followup.ephemeral and followup.content == "see you"
    assert handle.original is posted and posted.content == "mod left" and posted.edit_count == 2


async def test_string_select(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    sent = await bot.get_channel(world.games.id).send("Choose a mode", view=ModeSelect(bot.rec))
    with pytest.raises(ValueError, match="offers"):
        await fake_discord.select(sent.id, world.alice, "game:mode", ["arcade"])
    handle = await fake_discord.select(sent.id, world.alice, "game:mode", ["duel"])
    assert (await handle.wait_response()).content == "mode duel"
    assert bot.rec.calls[-1] == {"cmd": "mode", "values": ["duel"]}


async def test_oversize_upload_is_413(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    world.guild.upload_limit = 1024
    channel = bot.get_channel(world.general.id)
    with pytest.raises(discord.HTTPException) as err:
        await channel.send(file=discord.File(io.BytesIO(b"x" * 2048), "big.mp4"))
    assert err.value.status == 413 and err.value.code == 40005
    assert fake_discord.channel_messages(world.general) == []
    await channel.send(file=discord.File(io.BytesIO(b"x" * 1024), "ok.mp4"))  # at the limit is fine
    h = await fake_discord.slash(world.guild, world.general, world.alice, "game start", {"title": "x"})
    await h.wait_response()
    assert bot.rec.calls[-1]["filesize_limit"] == 1024


async def test_discord_error_codes(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    with pytest.raises(discord.NotFound) as err:
        await bot.get_partial_messageable(12345).send("hello?")
    assert err.value.code == 10003
    h = await fake_discord.slash(world.guild, world.general, world.alice, "game pick", {"character": "Rei"})
    await h.wait_response()
    async with aiohttp.ClientSession() as http:
        url = f"{fake_discord.api_base}/interactions/999/nope/callback"
        async with http.post(url, json={"type": 4, "data": {"content": "x"}}) as resp:
            assert resp.status == 404 and (await resp.json())["code"] == 10062
        url = f"{fake_discord.api_base}/interactions/{h.id}/{h.token}/callback"
        async with http.post(url, json={"type": 4, "data": {"content": "again"}}) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 40060
    # The bot lacks send_messages in a locked channel.
    locked = world.guild.create_text_channel("locked")
    locked.set_overwrite(world.guild.me, deny=discord.Permissions(send_messages=True))
    with pytest.raises(discord.Forbidden) as err:
        await bot.get_partial_messageable(locked.id).send("hi")
    assert err.value.code == 50013
    # Injected failures, e.g. to test the bot's handling of a lost permission or a missing message.
    fake_discord.fail_next("PATCH", r"^/channels/\d+/messages/\d+$", status=404, code=10008, message="Unknown Message")
    sent = await bot.get_channel(world.general.id).send("will vanish")
    with pytest.raises(discord.NotFound) as err:
        await sent.edit(content="too late")
    assert err.value.code == 10008
    await sent.edit(content="works again")
    assert fake_discord.messages[sent.id].edit_count == 1


async def test_late_first_response_is_unknown_interaction(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    fake_discord.interaction_ack_timeout = 0.1  # Discord's is 3 s; shortened to keep the test fast
    handle = await fake_discord.slash(world.guild, world.general, world.alice, "game slow")
    await fake_discord.wait_until(lambda: bot.rec.calls and bot.rec.calls[-1]["cmd"] == "slow", 5, "slow to fail")
    assert bot.rec.calls[-1] == {"cmd": "slow", "error": 10062} and not handle.responded
    fake_discord.interaction_ack_timeout = None
    handle = await fake_discord.slash(world.guild, world.general, world.alice, "game pick", {"character": "Rei"})
    assert (await handle.wait_response()).delay < 3.0


async def test_message_commands_carry_their_target_and_are_at_most_five(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    seen: list[tuple[int, str]] = []

    async def look(interaction: discord.Interaction, message: discord.Message) -> None:
        seen.append((message.id, message.content))
        await interaction.response.send_message("seen", ephemeral=True)

    for i in range(5):  # discord.py itself refuses a sixth (CommandLimitReached)
        bot.tree.add_command(discord.app_commands.ContextMenu(name=f"Look {i}", callback=look))
    await bot.tree.sync()
    six = [{"name": f"Look {i}", "type": 3} for i in range(6)]  # as another library might send them
    with pytest.raises(discord.HTTPException) as err:  # Discord: at most 5 message commands
        await bot.http.bulk_upsert_global_commands(fake_discord.application_id, six)
    assert err.value.status == 400 and err.value.code == 50035
    target = fake_discord.post_message(world.general, author=world.alice, content="look at me")
    h = await fake_discord.message_command(target, world.mod, "Look 0")
    assert h.payload["data"]["target_id"] == str(target.id)
    assert (await h.wait_response()).content == "seen" and seen == [(target.id, "look at me")]


async def test_message_edit_replaces_keeps_or_refuses_attachments_as_discord_does(
    fake_discord: FakeDiscord, world: World, bot: TinyBot
):
    """PATCH .../messages/{id}: `attachments` lists what the message keeps (existing ids) and the new
    files ({"id": n} for files[n]); what it leaves out is removed; a bad id is a 400 (50035)."""
    channel = bot.get_channel(world.games.id)
    assert isinstance(channel, discord.TextChannel)
    sent = await channel.send("status", file=discord.File(io.BytesIO(b"one"), "preview.webp"))
    old_id = sent.attachments[0].id
    # Replace: discord.py sends attachments [{"id": 0, ...}] with files[0].
    edited = await sent.edit(attachments=[discord.File(io.BytesIO(b"two"), "preview.webp")])
    req = fake_discord.requests_to("PATCH", "/channels/{channel_id}/messages/{message_id}")[-1]
    assert [a["id"] for a in req.json["attachments"]] == [0] and [f.filename for f in req.files] == ["preview.webp"]
    stored = fake_discord.messages[sent.id]
    assert [a.data for a in stored.attachments] == [b"two"] and stored.attachments[0].id != old_id
    # Keep the existing one by its id and add another.
    edited = await edited.edit(attachments=[edited.attachments[0], discord.File(io.BytesIO(b"mp4"), "turn.mp4")])
    assert [a.data for a in fake_discord.messages[sent.id].attachments] == [b"two", b"mp4"]
    # An edit without `attachments` keeps them; an empty list removes them all.
    await edited.edit(content="progress")
    assert len(fake_discord.messages[sent.id].attachments) == 2
    await edited.edit(attachments=[])
    assert fake_discord.messages[sent.id].attachments == []
    # Ids that are neither an attachment of the message nor an uploaded files[n] are refused, and
    # the refused edit changes nothing.
    route = discord.http.Route("PATCH", "/channels/{channel_id}/messages/{message_id}", channel_id=channel.id, message_id=sent.id)
    for bad in ([{"id": old_id}], [{"id": 3}], [{"filename": "x.webp"}]):
        with pytest.raises(discord.HTTPException) as refused:
            await bot.http.request(route, json={"content": "changed", "attachments": bad})
        assert refused.value.status == 400 and refused.value.code == 50035
    assert fake_discord.messages[sent.id].content == "progress"
    too_many = [discord.File(io.BytesIO(b"x"), f"f{i}.webp") for i in range(11)]
    with pytest.raises(discord.HTTPException) as refused:
        await sent.edit(attachments=too_many)
    assert refused.value.code == 50035
