"""/help: the commands this member may use here, with examples drawn from the channel's film.

The list is read from the command tree, so a new command appears by itself; who may use a
command comes from its group's `default_permissions` (Manage Server: admins, Manage Messages:
moderators) or a command's `extras["rights"]`, checked with the same functions as the commands.
"""

from __future__ import annotations

import discord
from discord import app_commands

from bot.answers import checks
from bot.answers.cogs.shared import GameCog, Interaction
from bot.client import AnimeGamerBot
from bot.parts.embeds import DESCRIPTION_MAX, EMBED_MAX, FIELD_NAME_MAX, FIELD_VALUE_MAX, INFO, TITLE_MAX, esc, fit
from bot.parts.service_args import place
from game import vocabulary
from game.catalogue import FILMS, Film
from i18n import L_, N_, _, pgettext
from service import reads

# The sections' headings (shown translated, with _(); marked here for extraction)
PLAYING, VOTING, LOOKING = N_("Playing"), N_("Voting"), N_("Looking around")
MODERATORS, ADMINS, OTHER = N_("Moderators"), N_("Admins"), N_("Other")
SECTIONS = {  # a root command's section
    "game": PLAYING, "act": PLAYING,
    "vote": VOTING,
    "status": LOOKING, "history": LOOKING, "queue": LOOKING, "export": LOOKING, "games": LOOKING, "help": LOOKING,
    "mod": MODERATORS, "admin": ADMINS,
}
ORDER = (PLAYING, VOTING, LOOKING, MODERATORS, ADMINS, OTHER)  # display order
MENU_ABOUT = {  # what a message command does, by its (English) name
    "Report shot": L_("send it to the moderators"),
    "Remove shot": L_("take your own shot down (a moderator: any shot)"),
}
EMBED_FIELDS_MAX = 25  # Discord: fields per embed
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


def typed(command: str, options: dict[str, object] | None = None) -> str:
    """A command as this member types it: the command's and its options' names as their Discord
    shows them (the names the translator gives each locale), e.g. `/ゲーム 参加 キャラクター:キキ`."""
    name = "/" + " ".join(pgettext("command name", part) for part in command.split())
    opts = " ".join(f"{pgettext('option name', k)}:{v}" for k, v in (options or {}).items())
    return f"{name} {opts}".strip()


def examples(film: Film, cast: list) -> dict[str, str]:
    """One example per command, in the film's own words and the member's language: names of
    commands, options, characters and suggestions as this member sees them."""
    names = [film.character_name_in(c.id) for c in cast or film.characters]  # as this member knows them
    first, other = names[0], names[-1]

    def pick(kind: str, i: int, fallback: str) -> str:
        options = vocabulary.terms_of(film, kind)
        return vocabulary.shown(kind, options[i % len(options)] if options else fallback)

    motion, motion2 = pick("motions", 0, "walk"), pick("motions", 1, "run")
    place, place2 = pick("backgrounds", 0, "town"), pick("backgrounds", 1, "park")
    how, when = pick("adverbs", 0, "slowly"), pick("times", 0, "day")
    company = {"with": other} if other != first else {}
    return {
        "game start": typed("game start"),
        "game join": typed("game join", {"character": first}),
        "act": typed("act", {"motion": motion, "background": place, "adverb": how, "time": when, **company}),
        "vote propose": typed("vote propose", {"motion": motion2, "background": place2, **company}),
        # TRANSLATORS: an example of a command; %(command)s and %(past)s are commands as typed.
        "history": _("%(command)s (a past game: %(past)s)", command=typed("history", {"count": 5}),
                     past=typed("history", {"game": 1})),
        "export": _("%(command)s (a past game: %(past)s)", command=typed("export"), past=typed("export", {"game": 1})),
        # TRANSLATORS: an example of a moderator's reason for pausing a game
        "mod pause": typed("mod pause", {"reason": _("lunch break")}),
        "mod cancel": typed("mod cancel", {"turn": 3}),
        "admin film": typed("admin film", {"film": film.id}),
        "admin character": typed("admin character", {"character": other, "enabled": "False"}),
        "admin limits": typed("admin limits", {"cooldown": 30, "backlog": 3}),
        "vote mode": typed("vote mode", {"enabled": "True", "seconds": 90}),
    }


def leaves(cmds) -> list[app_commands.Command]:
    out = []
    for c in cmds:
        if isinstance(c, app_commands.Group):
            out.extend(leaves(c.commands))
        else:
            out.append(c)
    return out


def chunks(lines: list[str], size: int = FIELD_VALUE_MAX) -> list[str]:
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


def pages(title: str, description: str, fields: list[tuple[str, str]]) -> list[discord.Embed]:
    """The help as embeds within Discord's limits (25 fields, 6000 characters each), the first
    with the title and description: a long translation takes a second message, never a refusal."""
    first = discord.Embed(title=fit(title, TITLE_MAX), description=fit(description, DESCRIPTION_MAX), colour=INFO)
    out = [first]
    size = len(first.title or "") + len(first.description or "")
    for name, value in fields:
        name = fit(name, FIELD_NAME_MAX)
        if len(out[-1].fields) >= EMBED_FIELDS_MAX or size + len(name) + len(value) > EMBED_MAX:
            out.append(discord.Embed(colour=INFO))
            size = 0
        out[-1].add_field(name=name, value=value, inline=False)
        size += len(name) + len(value)
    return out


class Help(GameCog):
    @app_commands.command(name="help", description="The commands you can use here, with examples from this channel's film")
    @app_commands.guild_only()
    async def help(self, interaction: Interaction) -> None:
        here = await reads.playing(self.service, place(interaction))
        cfg, film, voting = here.config, here.film, here.voting
        notes = []
        if film is None:
            film = FILMS[self.bot.settings.default_film]
            notes.append(_("No film is chosen here yet, so the examples use %(film)s.", film=film.title_in()))
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
            # The description as Discord shows it to this member (the translator's catalog entry)
            line = f"`{typed(name)}` — {esc(pgettext('command description', cmd.description))}"
            if name in ex:
                example = f"`{ex[name]}`"
                line += "\n  " + _("e.g. %(example)s", example=example)
            sections.setdefault(SECTIONS.get(name.split()[0], OTHER), []).append(line)

        menus = {m.name for m in self.bot.tree.get_commands(type=discord.AppCommandType.message)}
        for name in sorted(menus):  # right-click (or long-press) a turn's post, then Apps
            about = MENU_ABOUT.get(name)
            menu = "`" + pgettext("context menu", name) + "`"  # its name as this member's Discord shows it
            # TRANSLATORS: "Apps" is Discord's menu of a message (right-click or long-press a message)
            sections.setdefault(PLAYING, []).append(_(
                "Apps › %(menu)s on a turn's post — %(about)s",
                menu=menu, about=about if about is not None else _("see its description"),
            ))

        if is_admin:
            who = _("The commands you can use here, as an admin.")
        elif is_mod:
            who = _("The commands you can use here, as a moderator.")
        else:
            who = _("The commands you can use here, as a player.")
        if voting.enabled:
            notes.insert(0, _("This channel plays by vote: propose with /vote propose and vote on the round's message."))
        fields = []
        for section in ORDER:
            for i, value in enumerate(chunks(sections.get(section, []))):
                # TRANSLATORS: the heading of a section of /help continued in a second field
                fields.append((_(section) if i == 0 else _("%(section)s (more)", section=_(section)), value))
        embeds = pages(_("AnimeGamer · %(film)s", film=film.title_in()), " ".join([who, *notes]), fields)
        for e in embeds:
            await interaction.followup.send(embed=e, ephemeral=True)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Help(bot))
