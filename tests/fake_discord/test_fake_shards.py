"""Sharding in the fake gateway, driven by discord.py's AutoShardedBot: a shard gets only its guilds
((guild_id >> 22) % shard_count) in READY and GUILD_CREATE and only their events and interactions;
an invalid shard is closed with 4010; a shard identified twice gets everything twice; and a client
given no shard count launches what GET /gateway/bot recommends."""

from __future__ import annotations

import contextlib
import json

import aiohttp
import discord
import pytest
from discord.ext import commands

from testkit.fake_discord import FakeDiscord, FakeGuild, patch_discord
from testkit.fake_discord.client import start_client, stop_client
from testkit.fake_discord.gateway import CLOSE_INVALID_SHARD, OP_HELLO, OP_IDENTIFY
from testkit.fake_discord.tinybot import Recorder, build_game_group

CALLBACK = ("POST", "/interactions/{interaction_id}/{token}/callback")


class ShardedTinyBot(commands.AutoShardedBot):
    """TinyBot's app-command tree on discord.py's sharded client."""

    def __init__(self, rec: Recorder, **options) -> None:
        intents = discord.Intents.default()
        intents.members = True
        super().__init__(command_prefix="!", intents=intents, guild_ready_timeout=0.05, help_command=None, **options)
        self.rec = rec
        self.messages: list[discord.Message] = []
        self.tree.add_command(build_game_group(rec))

    async def on_message(self, message: discord.Message) -> None:
        if not message.author.bot:  # members' messages, not the answers to interactions
            self.messages.append(message)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """discord.py waits 5 s before each shard's IDENTIFY but the first; not needed against the fake."""


def make_guild(server: FakeDiscord, name: str, shard: tuple[int, int]) -> FakeGuild:
    guild = server.create_guild(name, shard=shard)
    guild.create_text_channel("general")
    guild.create_member("alice")
    return guild


@contextlib.asynccontextmanager
async def running(server: FakeDiscord, *clients: discord.Client):
    """Start the clients one after the other (each waits for its READY), close them all after."""
    tasks = []
    with patch_discord(server):
        try:
            for client in clients:
                tasks.append(await start_client(server, client))
            yield clients
        finally:
            for client, task in zip(clients, tasks, strict=False):
                await stop_client(client, task)


def shard_frames(server: FakeDiscord, shard: list[int]) -> list[dict]:
    (session,) = [s for s in server.gateway.sessions.values() if s.shard == shard]
    return session.buffer


async def slash_start(server: FakeDiscord, guild: FakeGuild, title: str):
    """alice runs /game start in the guild's #general."""
    return await server.slash(guild, guild.channel("general"), guild.member("alice"), "game start", {"title": title})


async def test_two_shard_processes_each_get_only_their_guilds(fake_discord: FakeDiscord):
    server = fake_discord
    a0, b0 = make_guild(server, "Zero A", (0, 2)), make_guild(server, "Zero B", (0, 2))
    c1 = make_guild(server, "One", (1, 2))
    assert [(g.id >> 22) % 2 for g in (a0, b0, c1)] == [0, 0, 1]
    rec0, rec1 = Recorder(), Recorder()
    zero = ShardedTinyBot(rec0, shard_ids=[0], shard_count=2)
    one = ShardedTinyBot(rec1, shard_ids=[1], shard_count=2)
    async with running(server, zero, one):
        await zero.tree.sync()
        assert {g.id for g in zero.guilds} == {a0.id, b0.id} and {g.id for g in one.guilds} == {c1.id}
        assert list(zero.shards) == [0] and list(one.shards) == [1]
        assert all(g.shard_id == 0 for g in zero.guilds) and all(g.shard_id == 1 for g in one.guilds)
        # What went over the wire: the shard pair in IDENTIFY, READY's guild list, one GUILD_CREATE per own guild.
        assert sorted(s.identify["shard"] for s in server.gateway.sessions.values()) == [[0, 2], [1, 2]]
        for shard, mine in (([0, 2], {a0.id, b0.id}), ([1, 2], {c1.id})):
            frames = shard_frames(server, shard)
            assert frames[0]["t"] == "READY" and frames[0]["d"]["shard"] == shard
            assert {int(g["id"]) for g in frames[0]["d"]["guilds"]} == mine
            assert {int(f["d"]["id"]) for f in frames if f["t"] == "GUILD_CREATE"} == mine
        assert not server.requests_to("GET", "/gateway/bot")  # a shard count given: nothing to ask

        # Interactions reach the shard of their guild only.
        for guild, title in ((a0, "a"), (c1, "c"), (b0, "b")):
            h = await slash_start(server, guild, title)
            assert (await h.wait_response()).content == f"Starting {title} (3 rounds)"
        assert [c["title"] for c in rec0.calls] == ["a", "b"] and [c["title"] for c in rec1.calls] == ["c"]
        assert all(r.status == 200 for r in server.requests_to(*CALLBACK))

        # So do a new guild, guild events and messages.
        d1 = make_guild(server, "One More", (1, 2))
        await server.wait_until(lambda: one.get_guild(d1.id), 2, "GUILD_CREATE on shard 1")
        arena = a0.create_text_channel("arena")
        await server.wait_until(lambda: zero.get_channel(arena.id), 2, "CHANNEL_CREATE on shard 0")
        await server.user_message(c1.channel("general"), c1.member("alice"), f"hi {one.user.mention}")
        await server.wait_until(lambda: one.messages, 2, "MESSAGE_CREATE on shard 1")
        await server.user_message(a0.channel("general"), a0.member("alice"), "hi shard zero")
        await server.wait_until(lambda: zero.messages, 2, "MESSAGE_CREATE on shard 0")
        # A marker on shard 1 after every event above: a shard's socket is in order, so anything
        # misrouted to either shard has been handled by the time its last message arrives (shard
        # 0's is the one just awaited).
        await server.user_message(c1.channel("general"), c1.member("alice"), "marker")
        await server.wait_until(lambda: len(one.messages) == 2, 2, "the marker on shard 1")
        assert zero.get_guild(d1.id) is None and one.get_channel(arena.id) is None
        assert [m.guild.id for m in zero.messages] == [a0.id] and [m.guild.id for m in one.messages] == [c1.id, c1.id]
        for shard, mine in (([0, 2], {a0.id, b0.id}), ([1, 2], {c1.id, d1.id})):
            about = {int(f["d"].get("guild_id") or f["d"]["id"]) for f in shard_frames(server, shard)[1:] if f["t"] != "RESUMED"}
            assert about == mine, (shard, about)


async def test_an_invalid_shard_is_closed_with_4010(fake_discord: FakeDiscord):
    make_guild(fake_discord, "Somewhere", (0, 1))
    client = ShardedTinyBot(Recorder(), shard_ids=[2], shard_count=2)
    with patch_discord(fake_discord), pytest.raises(discord.ConnectionClosed) as closed:
        await start_client(fake_discord, client)
    assert closed.value.code == CLOSE_INVALID_SHARD == 4010
    assert ("close", 4010, "server") in fake_discord.gateway.log
    assert fake_discord.gateway.sessions == {}
    await client.close()


@pytest.mark.parametrize("shard", [[0, 0], [3, 3], [-1, 2], [0], [0, 1, 2], "0,1", [0.0, 1], [True, 2]])
async def test_malformed_shard_pairs_are_closed_with_4010(fake_discord: FakeDiscord, shard):
    async with aiohttp.ClientSession() as http, http.ws_connect(fake_discord.gateway_url + "?v=10&encoding=json") as ws:
        assert json.loads((await ws.receive()).data)["op"] == OP_HELLO
        await ws.send_str(json.dumps({"op": OP_IDENTIFY, "d": {"token": fake_discord.token, "intents": 0, "shard": shard}}))
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == 4010
    assert fake_discord.gateway.sessions == {}


async def test_a_shard_identified_twice_gets_every_event_twice(fake_discord: FakeDiscord):
    """Two processes started with the same shard: both get the guild and each interaction, both
    answer, and the later answer fails (40060) - what a sharded bot must never do."""
    guild = make_guild(fake_discord, "Twice", (0, 2))
    first, second = Recorder(), Recorder()
    async with running(fake_discord, ShardedTinyBot(first, shard_ids=[0], shard_count=2),
                       ShardedTinyBot(second, shard_ids=[0], shard_count=2)) as (a, b):
        await a.tree.sync()
        assert a.get_guild(guild.id) and b.get_guild(guild.id)
        h = await slash_start(fake_discord, guild, "x")
        await fake_discord.wait_until(lambda: len(fake_discord.requests_to(*CALLBACK)) == 2, 5, "two answers")
        assert [c["title"] for c in first.calls] == ["x"] and [c["title"] for c in second.calls] == ["x"]
        assert sorted(r.status for r in fake_discord.requests_to(*CALLBACK)) == [200, 400]
        assert (await h.wait_response()).content == "Starting x (3 rounds)"
        arena = guild.create_text_channel("arena")
        await fake_discord.wait_until(lambda: a.get_channel(arena.id) and b.get_channel(arena.id), 2, "both CHANNEL_CREATE")


async def test_without_a_shard_count_the_client_launches_the_recommended_shards(fake_discord: FakeDiscord):
    fake_discord.gateway.recommended_shards = 2
    g0, g1 = make_guild(fake_discord, "Zero", (0, 2)), make_guild(fake_discord, "One", (1, 2))
    rec = Recorder()
    async with running(fake_discord, ShardedTinyBot(rec)) as (bot,):
        await bot.tree.sync()
        assert fake_discord.requests_to("GET", "/gateway/bot") and bot.shard_count == 2
        assert sorted(s.shard for s in fake_discord.gateway.sessions.values()) == [[0, 2], [1, 2]]
        assert {g.id for g in bot.guilds} == {g0.id, g1.id}
        for guild in (g0, g1):
            h = await slash_start(fake_discord, guild, guild.name)
            assert (await h.wait_response()).content == f"Starting {guild.name} (3 rounds)"
        assert [c["title"] for c in rec.calls] == ["Zero", "One"]


async def test_an_unsharded_identify_gets_every_guild(fake_discord: FakeDiscord):
    """No `shard` in IDENTIFY (commands.Bot): every guild and every interaction, as before sharding."""
    from testkit.fake_discord.tinybot import TinyBot

    guilds = [make_guild(fake_discord, "Zero", (0, 2)), make_guild(fake_discord, "One", (1, 2))]
    rec = Recorder()
    async with running(fake_discord, TinyBot(rec)) as (bot,):
        await bot.tree.sync()
        (session,) = fake_discord.gateway.sessions.values()
        assert "shard" not in session.identify and session.shard is None
        assert {g.id for g in bot.guilds} == {g.id for g in guilds}
        for guild in guilds:
            h = await slash_start(fake_discord, guild, guild.name)
            await h.wait_response()
        assert [c["title"] for c in rec.calls] == ["Zero", "One"]
