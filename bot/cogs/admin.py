"""/admin: the film, the playable cast, the limits and the bot's roles. Manage Server or a configured
admin role (checked by the bot); every change is written to the audit log in its transaction."""

from __future__ import annotations

import contextlib
import io
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands
from discord.ext import commands

from bot import audit as bot_audit
from bot import checks, context
from bot import modlog as modlog_setup
from bot.choices import character_choices, film_choices
from bot.embeds import INFO, esc
from db import audit, content_filters, guilds
from db import modlog as modlog_db
from game.catalogue import suggest
from game.content_rules import SERVER_FILTER

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


class Admin(commands.Cog):
    admin = app_commands.Group(
        name="admin",
        description="Configure the game on this server",
        guild_only=True,
        default_permissions=discord.Permissions(manage_guild=True),
    )

    filters = app_commands.Group(name="filter", description="This server's blocked words and phrases", parent=admin)

    def __init__(self, bot: AnimeGamerBot) -> None:
        self.bot = bot

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        """Every /admin command: Manage Server or a configured admin role (autocomplete is not checked)."""
        return await checks.require(interaction, "admin")

    @contextlib.asynccontextmanager
    async def _writing(self, interaction: discord.Interaction):
        """A transaction that writes the guild's settings; this process's cached configuration
        is dropped once it commits (other processes learn it by NOTIFY)."""
        async with self.bot.db.sessions.begin() as s:
            yield s
        self.bot.config.config_changed(interaction.guild_id)

    async def _done(self, interaction: discord.Interaction, text: str) -> None:
        await interaction.followup.send(text, ephemeral=True)

    @admin.command(name="film", description="Choose the film played on this server or in this channel")
    @app_commands.describe(film="The film", scope="The whole server (default) or only this channel")
    @app_commands.autocomplete(film=film_choices)
    async def film(self, interaction: discord.Interaction, film: str, scope: Literal["server", "channel"] = "server") -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        channel_id = context.channel_id(interaction) if scope == "channel" else None
        async with self._writing(interaction) as s:
            chosen = await guilds.set_film(s, context.guild_id(interaction), film, channel_id=channel_id)
            await bot_audit.record(s, interaction, "set_film", chosen.id, scope=scope)
        where = "this channel" if channel_id else "this server"
        await self._done(interaction, f"{where.capitalize()} now plays {chosen.title}, with its whole cast. New games use it.")

    @admin.command(name="character", description="Enable or disable a playable character here")
    @app_commands.describe(character="A character of the film configured here", enabled="Playable or not")
    @app_commands.autocomplete(character=character_choices)
    async def character(self, interaction: discord.Interaction, character: str, enabled: bool) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self._writing(interaction) as s:
            cast = await guilds.set_character_enabled(
                s, self.bot.settings, context.guild_id(interaction), context.channel_id(interaction), character, enabled
            )
            cfg = await guilds.channel_config(s, self.bot.settings, context.guild_id(interaction), context.channel_id(interaction))
            await bot_audit.record(s, interaction, "enable_character" if enabled else "disable_character", character, cast=sorted(cast))
        names = ", ".join(c.name for c in cfg.cast()) or "nobody"
        await self._done(interaction, f"Playable here now: {names}.")

    @admin.command(name="limits", description="Tighten this server's limits; they never go below this bot's own (leave an option out to keep it)")
    @app_commands.describe(
        cooldown="Seconds a player waits between turns (at least the bot's own)",
        backlog="Turns that may wait per game (at most the bot's own)",
        max_length="Characters per instruction (at most the bot's own)",
    )
    async def limits(
        self,
        interaction: discord.Interaction,
        cooldown: app_commands.Range[float, 0, 3600] | None = None,
        backlog: app_commands.Range[int, 1, 100] | None = None,
        max_length: app_commands.Range[int, 40, 2000] | None = None,
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self._writing(interaction) as s:
            change = await guilds.set_limits(
                s, self.bot.settings, context.guild_id(interaction),
                cooldown_seconds=cooldown, backlog_cap=backlog, max_instruction_len=max_length,
            )
            await bot_audit.record(s, interaction, "set_limits", None, cooldown=cooldown, backlog=backlog, max_length=max_length)
        lim = change.effective
        text = (
            f"Limits: cooldown {lim.cooldown_seconds:g} s, backlog {lim.backlog_cap} turns, "
            f"instructions up to {lim.max_instruction_len} characters."
        )
        labels = {"cooldown_seconds": "a cooldown of {:g} s", "backlog_cap": "a backlog of {:g}", "max_instruction_len": "{:g} characters"}
        looser = [labels[n].format(asked) for n, (asked, _) in change.clamped.items()]
        if looser:
            text += f"\nThis bot's operator allows no looser limits, so {' and '.join(looser)} does not apply; the values above do."
        await self._done(interaction, text)

    @admin.command(name="role", description="Give or take the bot's admin or moderator rights from a role")
    @app_commands.describe(kind="Which rights", role="The role", enabled="Give (default) or take away")
    async def role(
        self, interaction: discord.Interaction, kind: Literal["admin", "moderator"], role: discord.Role, enabled: bool = True
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self._writing(interaction) as s:
            cfg = await guilds.channel_config(s, self.bot.settings, context.guild_id(interaction), context.channel_id(interaction))
            ids = set(cfg.admin_role_ids if kind == "admin" else cfg.moderator_role_ids)
            (ids.add if enabled else ids.discard)(role.id)
            await guilds.set_roles(s, context.guild_id(interaction), **{f"{kind}_role_ids": sorted(ids)})
            await bot_audit.record(s, interaction, f"{'add' if enabled else 'remove'}_{kind}_role", str(role.id), role=role.name)
        verb = "now has" if enabled else "no longer has"
        await self._done(interaction, f"{esc(role.name)} {verb} the bot's {kind} rights.")

    @filters.command(name="add", description="Block a word or phrase in instructions here (*term* anywhere, term* prefix, *term suffix)")
    @app_commands.describe(term="A word or phrase of at most 60 characters; no star: the whole word only")
    async def filter_add(self, interaction: discord.Interaction, term: app_commands.Range[str, 1, 100]) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self._writing(interaction) as s:
            added = await content_filters.add(s, context.guild_id(interaction), term, interaction.user.id)
            await bot_audit.record(s, interaction, "filter_add", added)
        await self._done(interaction, f"Blocked here from now on: {esc(added)}")

    @filters.command(name="remove", description="Unblock a word or phrase of this server's filter")
    @app_commands.describe(term="The term as it was added (/admin filter list shows them)")
    async def filter_remove(self, interaction: discord.Interaction, term: app_commands.Range[str, 1, 100]) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self._writing(interaction) as s:
            removed = await content_filters.remove(s, context.guild_id(interaction), term)
            await bot_audit.record(s, interaction, "filter_remove", removed)
        await self._done(interaction, f"No longer blocked: {esc(removed)}")

    @filters.command(name="list", description="This server's blocked words and phrases")
    async def filter_list(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self.bot.db.sessions() as s:
            terms = await content_filters.terms(s, context.guild_id(interaction))
        if not terms:
            await self._done(interaction, "This server's filter is empty. Add a term with /admin filter add.")
            return
        head = f"This server's filter ({len(terms)} term(s)):\n"
        text = head + "\n".join(esc(t) for t in terms)
        if len(text) <= 2000:  # a message's limit; a longer list comes as a file, one term a line
            await self._done(interaction, text)
        else:
            data = io.BytesIO("\n".join(terms).encode("utf-8"))
            await interaction.followup.send(head.strip(), file=discord.File(data, filename="filter.txt"), ephemeral=True)

    @filter_remove.autocomplete("term")
    async def _filter_choices(self, interaction: discord.Interaction, current: str):
        # From the cached configuration (its rule sets include the filter): no query per keystroke.
        cfg = await self.bot.config.config(context.guild_id(interaction), context.channel_id(interaction))
        terms = next((r.terms for r in cfg.content_rules if r.name == SERVER_FILTER), ())
        return [app_commands.Choice(name=t, value=t) for t in suggest(terms, current)]

    @admin.command(name="log-channel", description="Where admin and moderator actions, refusals, removals and reports are posted")
    @app_commands.describe(channel="The moderation log channel (leave it out to turn the log off)")
    async def log_channel(self, interaction: discord.Interaction, channel: discord.TextChannel | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        if channel is not None:
            modlog_setup.require_postable(interaction, channel)
        async with self._writing(interaction) as s:
            await modlog_db.set_log_channel(s, context.guild_id(interaction), None if channel is None else channel.id)
            await bot_audit.record(s, interaction, "log_channel", None if channel is None else str(channel.id))
        if channel is None:
            await self._done(interaction, "The moderation log is off. Reports are refused until an admin sets a channel again.")
        else:
            await self._done(interaction, f"The moderation log now goes to <#{channel.id}>: admin and moderator actions, "
                                          "refused instructions, removed and reported shots.")

    @admin.command(name="show", description="What is configured here, and the latest admin and moderator actions")
    async def show(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self.bot.db.sessions() as s:
            cfg = await guilds.channel_config(s, self.bot.settings, context.guild_id(interaction), context.channel_id(interaction))
            recent = await audit.recent(s, context.guild_id(interaction), limit=10)
        e = discord.Embed(title="Game settings here", colour=INFO)
        e.add_field(name="Film", value=cfg.film.title if cfg.film else "none (choose one with /admin film)", inline=False)
        e.add_field(name="Playable", value=", ".join(c.name for c in cfg.cast()) or "nobody", inline=False)
        lim = cfg.limits
        e.add_field(
            name="Limits",
            value=f"cooldown {lim.cooldown_seconds:g} s · backlog {lim.backlog_cap} · {lim.max_instruction_len} characters",
            inline=False,
        )
        e.add_field(name="Admin roles", value=" ".join(f"<@&{r}>" for r in sorted(cfg.admin_role_ids)) or "none", inline=True)
        e.add_field(name="Moderator roles", value=" ".join(f"<@&{r}>" for r in sorted(cfg.moderator_role_ids)) or "none", inline=True)
        # Names and mentions, never bare ids (mentions in an embed render as names and never ping).
        log_lines = []
        for a in recent:
            line = bot_audit.describe(a)
            if sum(len(x) + 1 for x in log_lines) + len(line) > 1024:  # an embed field's limit
                break
            log_lines.append(line)
        e.add_field(name="Recent actions", value="\n".join(log_lines) or "none", inline=False)
        await interaction.followup.send(embed=e, ephemeral=True)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Admin(bot))
