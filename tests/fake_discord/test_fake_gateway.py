"""The real discord.py client against FakeDiscord's gateway and REST edges: dropped and invalidated
sessions, events after READY, a second client, compression, a bad token, nonces, injected faults
and rate limits, edit counting, and routes the fake lacks."""

from __future__ import annotations

import asyncio
import json

import discord
import pytest

from testkit.fake_discord import FakeDiscord, patch_discord, running_client
from testkit.fake_discord.client import start_client, stop_client
from testkit.fake_discord.tinybot import JoinView, NoIdentifyDelayBot, Recorder, TinyBot, World


async def test_gateway_drop_resumes_and_replays_missed_events(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    resumed = []

    async def on_resumed() -> None:
        resumed.append(True)

    bot.add_listener(on_resumed)
    await fake_discord.drop_gateway()
    # Dispatched while the socket is down: buffered in the session and replayed on RESUME.
    lobby = world.guild.create_text_channel("lobby")
    assert fake_discord.gateway.connected_sessions() == []
    await fake_discord.wait_for_gateway("resumed")
    await fake_discord.wait_until(lambda: resumed and bot.get_channel(lobby.id), 2, "on_resumed + CHANNEL_CREATE")
    assert sum(e[0] == "identify" for e in fake_discord.gateway.log) == 1
    # Interactions pushed during a drop wait for the reconnect, then arrive.
    await fake_discord.drop_gateway()
    handle = await fake_discord.slash(world.guild, world.general, world.alice, "game pick", {"character": "Asuka"})
    assert (await handle.wait_response()).content == "picked Asuka"
    # op 7 RECONNECT: the client reconnects and resumes too.
    fake_discord.send_reconnect()
    await fake_discord.wait_for_gateway("resumed", count=3)


async def test_invalidated_session_identifies_again(fake_discord: FakeDiscord, world: World):
    async with running_client(fake_discord, NoIdentifyDelayBot(Recorder())) as bot:
        await bot.tree.sync()
        fake_discord.invalidate_sessions()  # op 9, not resumable: IDENTIFY -> READY -> GUILD_CREATE again
        await fake_discord.wait_for_gateway("identify", count=2)
        await fake_discord.wait_until(lambda: bot.is_ready() and bot.get_guild(world.guild.id), 5, "READY again")
        handle = await fake_discord.slash(world.guild, world.general, world.alice, "game pick", {"character": "Rei"})
        assert (await handle.wait_response()).content == "picked Rei"


async def test_events_after_ready_reach_the_client(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    arena = world.guild.create_text_channel("arena")
    await fake_discord.wait_until(lambda: bot.get_channel(arena.id), 2, "CHANNEL_CREATE")
    newbie = world.guild.create_member("newbie")
    await fake_discord.wait_until(lambda: bot.get_guild(world.guild.id).get_member(newbie.id), 2, "GUILD_MEMBER_ADD")
    other = fake_discord.create_guild("Second Guild")
    await fake_discord.wait_until(lambda: bot.get_guild(other.id), 2, "GUILD_CREATE for a new guild")
    seen: list[discord.Message] = []

    async def on_message(message: discord.Message) -> None:
        seen.append(message)

    bot.add_listener(on_message)
    await fake_discord.user_message(world.general, world.alice, "hello bot")
    await fake_discord.wait_until(lambda: seen, 2, "on_message")
    assert seen[0].author.id == world.alice.id
    assert seen[0].content == ""  # no message_content intent, like real Discord
    await fake_discord.user_message(world.general, world.alice, f"hey {bot.user.mention}")
    await fake_discord.wait_until(lambda: len(seen) == 2, 2, "second on_message")
    assert seen[1].content == f"hey {bot.user.mention}" and bot.user.mentioned_in(seen[1])

    helpers = world.guild.create_role("Helpers", permissions=discord.Permissions(manage_messages=True))
    world.alice.add_role(helpers)
    member = bot.get_guild(world.guild.id).get_member(world.alice.id)
    await fake_discord.wait_until(lambda: helpers.id in [r.id for r in member.roles], 2, "GUILD_MEMBER_UPDATE")
    h = await fake_discord.slash(world.guild, world.general, world.alice, "game start", {"title": "x"})
    await h.wait_response()
    assert bot.rec.calls[-1]["manage_messages"] is True
    world.guild.edit_role(helpers, permissions=discord.Permissions(administrator=True))
    await fake_discord.wait_until(lambda: member.guild_permissions.administrator, 2, "GUILD_ROLE_UPDATE")
    world.guild.remove_member(world.alice)
    await fake_discord.wait_until(
        lambda: bot.get_guild(world.guild.id).get_member(world.alice.id) is None, 2, "GUILD_MEMBER_REMOVE"
    )


async def test_close_and_second_client_on_same_server(fake_discord: FakeDiscord, world: World):
    first, second = Recorder(), Recorder()
    async with running_client(fake_discord, TinyBot(first)) as client:
        await client.tree.sync()
        h = await fake_discord.slash(world.guild, world.general, world.alice, "game start", {"title": "one"})
        await h.wait_response()
    assert client.is_closed()
    assert fake_discord.gateway.connected_sessions() == []
    fake_discord.session_wait = 0.1
    with pytest.raises(RuntimeError, match="no gateway session"):
        await fake_discord.slash(world.guild, world.general, world.alice, "game start", {"title": "nobody"})

    async with running_client(fake_discord, TinyBot(second)) as client:
        assert client.get_guild(world.guild.id) is not None
        h = await fake_discord.slash(world.guild, world.general, world.alice, "game start", {"title": "two"})
        assert (await h.wait_response()).content == "Starting two (3 rounds)"
    assert [c["title"] for c in first.calls] == ["one"] and [c["title"] for c in second.calls] == ["two"]
    assert sum(e[0] == "identify" for e in fake_discord.gateway.log) == 2


async def test_default_intents_and_zlib_stream_gateway(world: World):
    async with FakeDiscord(gateway_compression=True) as server:
        guild = server.create_guild("Compressed")
        guild.create_text_channel("general")
        guild.create_member("alice")
        with patch_discord(server):
            client = TinyBot(Recorder(), intents=discord.Intents.default())
            task = await start_client(server, client)
            try:
                cached = client.get_guild(guild.id)
                # Without the members intent GUILD_CREATE carries only the bot itself.
                assert cached.member_count == 3 and [m.id for m in cached.members] == [server.bot_user.id]
                connect = next(e for e in server.gateway.log if e[0] == "connect")
                assert connect[1]["compress"] == "zlib-stream"
            finally:
                await stop_client(client, task)


async def test_bad_token_fails_login(fake_discord: FakeDiscord):
    client = discord.Client(intents=discord.Intents.default())
    with patch_discord(fake_discord), pytest.raises(discord.LoginFailure):
        await client.login("wrong-token")
    await client.close()
    assert json.dumps(fake_discord.requests[-1].response) == json.dumps({"message": "401: Unauthorized", "code": 0})


async def test_enforce_nonce_returns_the_first_message(fake_discord):
    """Like Discord: a repeated nonce with enforce_nonce answers with the message already created."""
    guild = fake_discord.create_guild("Nonce")
    channel = guild.create_text_channel("games")
    client = discord.Client(intents=discord.Intents.default(), guild_ready_timeout=0.05)
    async with running_client(fake_discord, client):
        ch = client.get_channel(channel.id)
        first = await ch.send("hello", nonce="abc123")
        again = await ch.send("hello again", nonce="abc123")
        other = await ch.send("other", nonce="xyz789")
    assert again.id == first.id and other.id != first.id
    assert [m.content for m in fake_discord.channel_messages(channel)] == ["hello", "other"]


async def test_injected_faults_by_route_and_rate_limit_retry(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    channel = bot.get_channel(world.games.id)
    sent = await channel.send("status")
    # Two 429s on the edit route: discord.py sleeps retry_after each time, then the third try lands.
    edit_route = "/channels/{channel_id}/messages/{message_id}"
    limited = fake_discord.fail_next("PATCH", route=edit_route, status=429, retry_after=0.05, times=2)
    await sent.edit(content="edited")
    assert len(limited.hits) == 2 and limited.remaining == 0
    assert [r.status for r in fake_discord.requests_to("PATCH", edit_route)] == [429, 429, 200]
    assert limited.hits[0].response["retry_after"] == 0.05
    assert fake_discord.messages[sent.id].content == "edited" and fake_discord.messages[sent.id].edit_count == 1
    # A 502 is retried by discord.py too (after 1 s); a 403 is not.
    post_route = "/channels/{channel_id}/messages"
    fake_discord.fail_next("POST", route=post_route, status=502)
    await channel.send("after a bad gateway")
    fake_discord.fail_next("POST", route=post_route, status=403, code=50013, message="Missing Permissions")
    with pytest.raises(discord.Forbidden):
        await channel.send("refused")
    assert [m.content for m in fake_discord.channel_messages(world.games)] == ["edited", "after a bad gateway"]
    with pytest.raises(ValueError, match="no route"):
        fake_discord.fail_next("POST", route="/channels/{channel_id}/typing")
    with pytest.raises(ValueError, match="exactly one"):
        fake_discord.fail_next("POST")


async def test_edits_per_channel_and_window(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    channel = bot.get_channel(world.games.id)
    first, second = await channel.send("one"), await channel.send("two")
    for i in range(3):
        await first.edit(content=f"one {i}")
    await asyncio.sleep(0.3)  # sleep: the gap between two bursts is the input the window count is tested on
    await second.edit(content="two 0")
    await second.edit(content="two 1")
    other = await bot.get_channel(world.general.id).send("elsewhere")
    await other.edit(content="elsewhere, edited")

    edits = fake_discord.channel_edits(world.games)
    assert [m.id for _, m in edits] == [first.id] * 3 + [second.id] * 2
    assert [at for at, _ in edits] == sorted(at for at, _ in edits)
    assert fake_discord.max_edits_in_window(world.games, 0.2) == 3  # the pause splits the two bursts
    assert fake_discord.max_edits_in_window(world.games, 5.0) == 5
    assert fake_discord.max_edits_in_window(world.general) == 1
    # A button's type 7 answer edits through the interaction, not the channel route.
    posted = fake_discord.post_message(world.games, content="Lobby", components=JoinView(bot.rec).to_components())
    await (await fake_discord.click(posted, world.alice, "game:join")).wait_response()
    assert fake_discord.max_edits_in_window(world.games, 5.0) == 5
    assert fake_discord.max_edits_in_window(world.games, 5.0, via=None) == 6


async def test_routes_the_fake_lacks_are_404_and_recorded(fake_discord: FakeDiscord, world: World, bot: TinyBot):
    with pytest.raises(discord.NotFound):
        await bot.get_channel(world.general.id).typing()  # the bot never shows "typing..."
    (rec,) = fake_discord.unhandled
    assert (rec.method, rec.path, rec.route, rec.status) == ("POST", f"/channels/{world.general.id}/typing", None, 404)
    fake_discord.unhandled.clear()  # the fixture asserts none are left
