"""The real discord.py client (commands.Bot + app-command tree) against FakeDiscord."""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import discord
import pytest
from discord import app_commands
from discord.ext import commands

from tests.fake_discord import FakeDiscord, FakeGuild, patch_discord, running_client
from tests.fake_discord.client import start_client, stop_client

CLIP = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 4
CHARACTERS = ["Akira", "Akane", "Asuka", "Rei", "Shinji"]


# ---------------------------------------------------------------------------------------------
# The bot under test: a tiny tree that exercises what the AnimeGamer cogs will use.


@dataclass
class Recorder:
    calls: list[dict[str, Any]] = field(default_factory=list)


class JoinView(discord.ui.View):
    """Persistent: timeout=None and a static custom_id, so clicks work after a restart."""

    def __init__(self, rec: Recorder) -> None:
        super().__init__(timeout=None)
        self.rec = rec

    @discord.ui.button(label="Join", style=discord.ButtonStyle.primary, custom_id="game:join")
    async def join(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
        self.rec.calls.append({"cmd": "join", "user": interaction.user.id, "message": interaction.message.id})
        await interaction.response.edit_message(content=f"{interaction.user.name} joined")

    @discord.ui.button(label="Leave", style=discord.ButtonStyle.secondary, custom_id="game:leave")
    async def leave(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
        await interaction.response.defer()  # type 6 on a component: edit the clicked message later
        await interaction.edit_original_response(content=f"{interaction.user.name} left")
        await interaction.followup.send("see you", ephemeral=True)


class ModeSelect(discord.ui.View):
    def __init__(self, rec: Recorder) -> None:
        super().__init__(timeout=None)
        self.rec = rec

    @discord.ui.select(
        custom_id="game:mode",
        options=[discord.SelectOption(label="Story", value="story"), discord.SelectOption(label="Duel", value="duel")],
    )
    async def mode(self, interaction: discord.Interaction, select: discord.ui.Select) -> None:
        self.rec.calls.append({"cmd": "mode", "values": select.values})
        await interaction.response.send_message(f"mode {select.values[0]}")


class TinyBot(commands.Bot):
    def __init__(self, rec: Recorder, *, intents: discord.Intents | None = None) -> None:
        if intents is None:
            intents = discord.Intents.default()
            intents.members = True
        # guild_ready_timeout: on_ready fires this long after the last GUILD_CREATE (default 2 s).
        super().__init__(command_prefix="!", intents=intents, guild_ready_timeout=0.05, help_command=None)
        self.rec = rec
        self.tree.add_command(build_game_group(rec))

    async def setup_hook(self) -> None:
        self.add_view(JoinView(self.rec))


def build_game_group(rec: Recorder) -> app_commands.Group:
    game = app_commands.Group(name="game", description="AnimeGamer games")

    @game.command(name="start", description="Start a game")
    @app_commands.describe(title="Game title", rounds="Number of rounds")
    async def start(
        interaction: discord.Interaction,
        title: str,
        rounds: app_commands.Range[int, 1, 10] = 3,
        fast: bool = False,
        rival: discord.Member | None = None,
    ) -> None:
        perms = interaction.permissions
        rec.calls.append(
            {
                "cmd": "start",
                "title": title,
                "rounds": rounds,
                "fast": fast,
                "rival": rival,
                "user": interaction.user,
                "roles": sorted(r.name for r in interaction.user.roles),
                "administrator": perms.administrator,
                "manage_guild": perms.manage_guild,
                "manage_messages": perms.manage_messages,
                "is_owner": interaction.guild.owner_id == interaction.user.id,
                "filesize_limit": interaction.filesize_limit,
                "channel": interaction.channel,
            }
        )
        await interaction.response.send_message(f"Starting {title} ({rounds} rounds)")

    @game.command(name="render", description="Render a clip")
    async def render(interaction: discord.Interaction) -> None:
        await interaction.response.defer(thinking=True)
        await interaction.followup.send("clip ready", file=discord.File(io.BytesIO(CLIP), "clip.mp4"))

    @game.command(name="play", description="Play a turn")
    async def play(interaction: discord.Interaction, title: str) -> None:
        # The AnimeGamer pattern: defer, post results with channel.send, then settle @original.
        await interaction.response.defer(thinking=True)
        await interaction.channel.send(f"{title}: turn 1", file=discord.File(io.BytesIO(CLIP), "turn1.mp4"))
        await interaction.edit_original_response(content="turn posted")

    @game.command(name="slow", description="Answers too late")
    async def slow(interaction: discord.Interaction) -> None:
        await asyncio.sleep(0.3)
        try:
            await interaction.response.send_message("finally")
        except discord.NotFound as exc:
            rec.calls.append({"cmd": "slow", "error": exc.code})

    @game.command(name="pick", description="Pick a character")
    async def pick(interaction: discord.Interaction, character: str) -> None:
        await interaction.response.send_message(f"picked {character}")

    @pick.autocomplete("character")
    async def pick_autocomplete(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=c, value=c) for c in CHARACTERS if c.lower().startswith(current.lower())]

    @game.command(name="upload", description="Upload a reference image")
    async def upload(interaction: discord.Interaction, image: discord.Attachment) -> None:
        data = await image.read()  # fetched from the fake's attachment URL
        rec.calls.append({"cmd": "upload", "filename": image.filename, "data": data})
        await interaction.response.send_message(f"got {image.filename} ({len(data)} bytes)", ephemeral=True)

    return game


# ---------------------------------------------------------------------------------------------
# World and helpers


@dataclass
class World:
    guild: FakeGuild
    general: Any
    games: Any
    alice: Any  # plain member
    mod: Any  # manage_messages via role
    admin: Any  # administrator via role
    manager: Any  # manage_guild via role


def build_world(server: FakeDiscord) -> World:
    guild = server.create_guild("AnimeGamer Test")
    general = guild.create_text_channel("general")
    games = guild.create_text_channel("games", topic="play here")
    mods = guild.create_role("Mods", permissions=discord.Permissions(manage_messages=True))
    admins = guild.create_role("Admins", permissions=discord.Permissions(administrator=True))
    managers = guild.create_role("Managers", permissions=discord.Permissions(manage_guild=True))
    return World(
        guild=guild,
        general=general,
        games=games,
        alice=guild.create_member("alice"),
        mod=guild.create_member("mod", roles=[mods]),
        admin=guild.create_member("admin", roles=[admins]),
        manager=guild.create_member("manager", roles=[managers]),
    )


@pytest.fixture
def world(fake_discord: FakeDiscord) -> World:
    return build_world(fake_discord)


@pytest.fixture
async def bot(fake_discord: FakeDiscord, world: World):
    rec = Recorder()
    async with running_client(fake_discord, TinyBot(rec)) as client:
        await client.tree.sync()
        yield client


# ---------------------------------------------------------------------------------------------
# Tests


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


class NoIdentifyDelayBot(TinyBot):
    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """discord.py sleeps 5 s before every re-IDENTIFY; not needed against the fake."""


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
    await asyncio.sleep(0.3)
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
