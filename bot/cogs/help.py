"""/help: the commands this member may use here, with examples drawn from the channel's film.

The list is read from the command tree, so a new command appears by itself; who may use a
command comes from its group's `default_permissions` (Manage Server: admins, Manage Messages:
moderators) or a command's `extras["rights"]`, checked with the same functions as the commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import checks, context
from bot.embeds import INFO, esc
from db import guilds, votes
from db import sessions as game_sessions
from game.catalogue import FILMS, Film

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

SECTIONS = {  # a root command's section, in display order
    "game": "Playing", "act": "Playing",
    "vote": "Voting",
    "status": "Looking around", "history": "Looking around", "queue": "Looking around", "export": "Looking around",
    "games": "Looking around", "help": "Looking around",
    "mod": "Moderators", "admin": "Admins",
}
ORDER = ("Playing", "Voting", "Looking around", "Moderators", "Admins", "Other")
DIRECT_ONLY = {"act"}  # refused in vote mode
VOTE_ONLY = {"vote propose", "vote open"}  # refused outside vote mode


def rights_of(cmd: app_commands.Command) -> str | None:
    """'admin', 'moderator' or None (every member)."""
    if cmd.extras.get("rights"):
        return cmd.extras["rights"]
    perms = (cmd.root_parent or cmd).default_permissions
    if perms is not None and perms.manage_guild:
        return "admin"
    if perms is not None and perms.manage_messages:
        return "moderator"
    return None


def examples(film: Film, cast: list) -> dict[str, str]:
    """One example per command, in the film's own words."""
    names = [c.name for c in cast] or [c.name for c in film.characters]
    first, other = names[0], names[-1]

    def pick(options: tuple[str, ...], i: int, fallback: str) -> str:
        return options[i % len(options)] if options else fallback

    motion, motion2 = pick(film.motions, 0, "walk"), pick(film.motions, 1, "run")
    place, place2 = pick(film.backgrounds, 0, "town"), pick(film.backgrounds, 1, "park")
    how, when = pick(film.adverbs, 0, "slowly"), pick(film.times, 0, "day")
    return {
        "game start": "/game start",
        "game join": f"/game join character:{first}",
        "act": f"/act motion:{motion} background:{place} adverb:{how} time:{when}"
        + (f" with:{other}" if other != first else ""),
        "vote propose": f"/vote propose motion:{motion2} background:{place2}" + (f" with:{other}" if other != first else ""),
        "history": "/history count:5 (a past game: /history game:1)",
        "export": "/export (a past game: /export game:1)",
        "mod pause": "/mod pause reason:lunch break",
        "mod cancel": "/mod cancel turn:3",
        "admin film": f"/admin film film:{film.id}",
        "admin character": f"/admin character character:{other} enabled:False",
        "admin limits": "/admin limits cooldown:30 backlog:3",
        "vote mode": "/vote mode enabled:True seconds:90",
    }


def leaves(cmds) -> list[app_commands.Command]:
    out = []
    for c in cmds:
        if isinstance(c, app_commands.Group):
            out.extend(leaves(c.commands))
        else:
            out.append(c)
    return out


def chunks(lines: list[str], size: int = 1024) -> list[str]:
    """Field values (at most 1024 characters each), whole lines only."""
    out, cur = [], ""
    for line in lines:
        if cur and len(cur) + 1 + len(line) > size:
            out.append(cur)
            cur = ""
        cur = f"{cur}\n{line}" if cur else line[:size]
    if cur:
        out.append(cur)
    return out


class Help(commands.Cog):
    def __init__(self, bot: AnimeGamerBot) -> None:
        self.bot = bot

    @app_commands.command(name="help", description="The commands you can use here, with examples from this channel's film")
    @app_commands.guild_only()
    async def help(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self.bot.db.sessions() as s:
            cfg = await guilds.channel_config(s, self.bot.settings, context.guild_id(interaction), context.channel_id(interaction))
            gs = await game_sessions.live_session(s, context.channel_id(interaction))
            voting = await votes.vote_config(s, context.channel_id(interaction))
        film = FILMS.get(gs.film_id) if gs is not None else cfg.film
        note = ""
        if film is None:
            film = FILMS[self.bot.settings.default_film]
            note = f" No film is chosen here yet, so the examples use {film.title}."
        is_admin = await checks.is_admin(interaction)
        is_mod = is_admin or await checks.is_moderator(interaction)
        allowed = {None: True, "moderator": is_mod, "admin": is_admin}
        ex = examples(film, cfg.cast_for(film))

        sections: dict[str, list[str]] = {}
        chat = self.bot.tree.get_commands(type=discord.AppCommandType.chat_input)  # the message commands follow
        for cmd in sorted(leaves(chat), key=lambda c: c.qualified_name):
            name = cmd.qualified_name
            if not allowed.get(rights_of(cmd), False):
                continue
            if (voting.enabled and name in DIRECT_ONLY) or (not voting.enabled and name in VOTE_ONLY):
                continue
            line = f"`/{name}` — {esc(cmd.description)}"
            if name in ex:
                line += f"\n  e.g. `{ex[name]}`"
            sections.setdefault(SECTIONS.get(name.split()[0], "Other"), []).append(line)

        menus = {m.name for m in self.bot.tree.get_commands(type=discord.AppCommandType.message)}
        about = {"Report shot": "send it to the moderators", "Remove shot": "take your own shot down (a moderator: any shot)"}
        for name in sorted(menus):  # right-click (or long-press) a turn's post, then Apps
            sections.setdefault("Playing", []).append(f"Apps › `{name}` on a turn's post — {about.get(name, 'see its description')}")

        who = "an admin" if is_admin else "a moderator" if is_mod else "a player"
        mode = " This channel plays by vote: propose with /vote propose and vote on the round's message." if voting.enabled else ""
        e = discord.Embed(
            title=f"AnimeGamer · {film.title}",
            description=f"The commands you can use here, as {who}.{mode}{note}",
            colour=INFO,
        )
        for section in ORDER:
            for i, value in enumerate(chunks(sections.get(section, []))):
                e.add_field(name=section if i == 0 else f"{section} (more)", value=value, inline=False)
        await interaction.followup.send(embed=e, ephemeral=True)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Help(bot))
