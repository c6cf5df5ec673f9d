"""The bot the fake Discord's own tests drive: a tiny discord.py commands.Bot whose app-command tree
and views exercise what the AnimeGamer cogs use (options and permissions, deferring, files,
autocomplete, persistent buttons, selects), and the guild it plays in."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass, field
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from testkit.fake_discord import FakeDiscord, FakeGuild

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
        await asyncio.sleep(0.3)  # sleep: answering late is this command's behaviour (the fake's 3 s rule, shortened)
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


class NoIdentifyDelayBot(TinyBot):
    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """discord.py sleeps 5 s before every re-IDENTIFY; not needed against the fake."""
