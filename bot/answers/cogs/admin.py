"""/admin: the film, the playable cast, the limits, the bot's roles and the language of public
posts. Manage Server or a configured admin role (checked by the bot); every change is written to
the audit log in its transaction."""

from __future__ import annotations

import io
from typing import Literal

import babel
import discord
from discord import app_commands

from bot.answers import checks
from bot.answers import modlog as modlog_setup
from bot.answers.choices import character_choices, film_choices
from bot.answers.cogs.shared import GameCog, Interaction
from bot.client import AnimeGamerBot
from bot.parts import audit as bot_audit
from bot.parts import context, locale
from bot.parts.embeds import CONTENT_MAX, FIELD_VALUE_MAX, INFO, esc, fit
from bot.parts.service_args import member, place
from game.catalogue import suggest
from game.content_rules import SERVER_FILTER
from game.texts import wait_text
from i18n import _, locales, ngettext
from i18n.formatting import day, items, number
from service import admin
from service.shares import ServerShare
from settings.limits import BACKLOG, COOLDOWN_SECONDS, INSTRUCTION_LEN

AUTOMATIC = admin.AUTOMATIC  # /admin language's choice for "follow Discord's server language"


def autonym(code: str) -> str:
    """A shipped locale's name in its own language (日本語, Français): how a member finds theirs."""
    try:
        name = babel.Locale.parse(locales.babel_locale(code)).get_display_name(locales.babel_locale(code)) or code
    except (ValueError, babel.UnknownLocaleError):
        return code
    return name[:1].upper() + name[1:]


# Built at import from the shipped catalogs. The languages' own names are not translated (a
# member looks for their language's name as they write it): `autonym` marks them for the
# translator and the extraction to leave alone.
LANGUAGE_CHOICES = [
    app_commands.Choice(name="Automatic (Discord's server language)", value=AUTOMATIC),
    *(app_commands.Choice(name=app_commands.locale_str(autonym(code), autonym=True), value=code)
      for code in locales.shipped()),
][:25]  # Discord: 25 choices at most


class Admin(GameCog):
    admin = app_commands.Group(
        name="admin",
        description="Configure the game on this server",
        guild_only=True,
        default_permissions=discord.Permissions(manage_guild=True),
    )

    filters = app_commands.Group(name="filter", description="This server's blocked words and phrases", parent=admin)

    async def interaction_check(self, interaction: Interaction) -> bool:
        """Every /admin command: Manage Server or a configured admin role (autocomplete is not checked)."""
        return await checks.require(interaction, "admin")

    def _changed(self, interaction: Interaction) -> None:
        """The guild's settings changed (committed): this process's cached configuration is
        dropped (other processes learn it by NOTIFY)."""
        self.bot.config.config_changed(interaction.guild_id)

    async def _done(self, interaction: Interaction, text: str) -> None:
        await interaction.followup.send(text, ephemeral=True)

    @admin.command(name="film", description="Choose the film played on this server or in this channel")
    @app_commands.describe(film="The film", scope="The whole server (default) or only this channel")
    @app_commands.autocomplete(film=film_choices)
    async def film(self, interaction: Interaction, film: str, scope: Literal["server", "channel"] = "server") -> None:
        chosen = await admin.set_film(self.service, place(interaction), member(interaction), film, channel_only=scope == "channel")
        self._changed(interaction)
        if scope == "channel":
            text = _("This channel now plays %(film)s, with its whole cast. New games use it.", film=chosen.title_in())
        else:
            text = _("This server now plays %(film)s, with its whole cast. New games use it.", film=chosen.title_in())
        await self._done(interaction, text)

    @admin.command(name="character", description="Enable or disable a playable character here")
    @app_commands.describe(character="A character of the film configured here", enabled="Playable or not")
    @app_commands.autocomplete(character=character_choices)
    async def character(self, interaction: Interaction, character: str, enabled: bool) -> None:
        _cast, cfg = await admin.set_character(self.service, place(interaction), member(interaction), character, enabled)
        self._changed(interaction)
        names = ", ".join(cfg.film.character_name_in(c.id) for c in cfg.cast()) if cfg.film else ""
        names = names or _("nobody")
        await self._done(interaction, fit(_("Playable here now: %(names)s.", names=names), CONTENT_MAX))

    @admin.command(name="limits", description="Tighten this server's limits; they never go below this bot's own (leave an option out to keep it)")
    @app_commands.describe(
        cooldown="Seconds a player waits between turns (at least the bot's own)",
        backlog="Turns that may wait per game (at most the bot's own)",
        max_length="Characters per instruction (at most the bot's own)",
    )
    async def limits(
        self,
        interaction: Interaction,
        cooldown: app_commands.Range[float, COOLDOWN_SECONDS.low, COOLDOWN_SECONDS.high] | None = None,
        backlog: app_commands.Range[int, BACKLOG.low, BACKLOG.high] | None = None,
        max_length: app_commands.Range[int, INSTRUCTION_LEN.low, INSTRUCTION_LEN.high] | None = None,
    ) -> None:
        change = await admin.set_limits(self.service, place(interaction), member(interaction), cooldown=cooldown,
                                        backlog=backlog, max_length=max_length)
        self._changed(interaction)
        text = _limits_text(change.effective)
        looser = [_looser(name, asked) for name, (asked, _effective) in change.clamped.items()]
        if looser:
            text += "\n" + _("This bot's operator allows no looser limits, so %(asked)s does not apply; the values above do.",
                             asked=items(looser))
        await self._done(interaction, text)

    @admin.command(name="role", description="Give or take the bot's admin or moderator rights from a role")
    @app_commands.describe(kind="Which rights", role="The role", enabled="Give (default) or take away")
    async def role(
        self, interaction: Interaction, kind: Literal["admin", "moderator"], role: discord.Role, enabled: bool = True
    ) -> None:
        await admin.set_role(self.service, place(interaction), member(interaction), kind, role.id, role.name, enabled)
        self._changed(interaction)
        await self._done(interaction, fit(_role_text(esc(role.name), kind, enabled), CONTENT_MAX))

    @filters.command(name="add", description="Block a word or phrase in instructions here (*term* anywhere, term* prefix, *term suffix)")
    @app_commands.describe(term="A word or phrase of at most 60 characters; no star: the whole word only")
    async def filter_add(self, interaction: Interaction, term: app_commands.Range[str, 1, 100]) -> None:
        added = await admin.add_filter_term(self.service, place(interaction), member(interaction), term)
        self._changed(interaction)
        await self._done(interaction, _("Blocked here from now on: %(term)s", term=esc(added)))

    @filters.command(name="remove", description="Unblock a word or phrase of this server's filter")
    @app_commands.describe(term="The term as it was added (/admin filter list shows them)")
    async def filter_remove(self, interaction: Interaction, term: app_commands.Range[str, 1, 100]) -> None:
        removed = await admin.remove_filter_term(self.service, place(interaction), member(interaction), term)
        self._changed(interaction)
        await self._done(interaction, _("No longer blocked: %(term)s", term=esc(removed)))

    @filters.command(name="list", description="This server's blocked words and phrases")
    async def filter_list(self, interaction: Interaction) -> None:
        terms = await admin.filter_terms(self.service, place(interaction))
        if not terms:
            await self._done(interaction, _("This server's filter is empty. Add a term with /admin filter add."))
            return
        head = ngettext("This server's filter (%(n)s term):", "This server's filter (%(n)s terms):", len(terms)) + "\n"
        text = head + "\n".join(esc(t) for t in terms)
        if len(text) <= CONTENT_MAX:  # a message's limit; a longer list comes as a file, one term a line
            await self._done(interaction, text)
        else:
            data = io.BytesIO("\n".join(terms).encode("utf-8"))
            await interaction.followup.send(head.strip(), file=discord.File(data, filename="filter.txt"), ephemeral=True)

    @filter_remove.autocomplete("term")
    async def _filter_choices(self, interaction: Interaction, current: str):
        # From the cached configuration (its rule sets include the filter): no query per keystroke.
        cfg = await self.bot.config.config(context.guild_id(interaction), context.channel_id(interaction))
        terms = next((r.terms for r in cfg.content_rules if r.name == SERVER_FILTER), ())
        return [app_commands.Choice(name=t, value=t) for t in suggest(terms, current)]

    @admin.command(name="log-channel", description="Where admin and moderator actions, refusals, removals and reports are posted")
    @app_commands.describe(channel="The moderation log channel (leave it out to turn the log off)")
    async def log_channel(self, interaction: Interaction, channel: discord.TextChannel | None = None) -> None:
        if channel is not None:
            modlog_setup.require_postable(interaction, channel)
        await admin.set_log_channel(self.service, place(interaction), member(interaction), None if channel is None else channel.id)
        self._changed(interaction)
        if channel is None:
            await self._done(interaction, _("The moderation log is off. Reports are refused until an admin sets a channel again."))
        else:
            mention = f"<#{channel.id}>"
            await self._done(interaction, _("The moderation log now goes to %(channel)s: admin and moderator actions, "
                                            "refused instructions, removed and reported shots.", channel=mention))

    @admin.command(name="language", description="The language of the bot's public posts on this server, or in one channel")
    @app_commands.describe(
        language="A language, or automatic: Discord's server language",
        channel="Only this channel (leave it out for the whole server)",
    )
    @app_commands.choices(language=LANGUAGE_CHOICES)
    async def language(self, interaction: Interaction, language: str, channel: discord.TextChannel | None = None) -> None:
        guild_id = context.guild_id(interaction)
        chosen = None if language == AUTOMATIC else language
        channel_id = None if channel is None else channel.id
        mention = None if channel is None else f"<#{channel.id}>"
        await admin.set_language(self.service, place(interaction), member(interaction), chosen, channel_id)
        self._changed(interaction)
        if chosen is not None:
            name = autonym(chosen)
            if channel_id is None:
                text = _("This server's public posts are now in %(language)s.", language=name)
            else:
                text = _("Public posts in %(channel)s are now in %(language)s.", channel=mention, language=name)
        elif channel_id is None:
            name = autonym(locales.resolve(interaction.guild_locale))
            text = _("This server's public posts now follow Discord's server language, currently %(language)s.", language=name)
        else:  # the server's choice applies again there (the cache was dropped on commit)
            name = autonym(await locale.server_language(self.bot, guild_id, channel_id, guild_locale=interaction.guild_locale))
            text = _("Public posts in %(channel)s now follow the server's language, currently %(language)s.",
                     channel=mention, language=name)
        await self._done(interaction, text)

    @admin.command(name="previews", description="Show pictures of each clip forming while it is made, or not")
    @app_commands.describe(state="on: the turn's message shows the clip forming; off: only its progress")
    async def previews(self, interaction: Interaction, state: Literal["on", "off"]) -> None:
        await admin.set_previews(self.service, place(interaction), member(interaction), state == "on")
        self._changed(interaction)
        await self._done(interaction, _("Turns on this server now show their clip forming while it is made.") if state == "on"
                         else _("Turns on this server no longer show previews while they are made; only their progress."))

    @admin.command(name="show", description="What is configured here, and the latest admin and moderator actions")
    async def show(self, interaction: Interaction) -> None:
        shown = await admin.shown(self.service, place(interaction))
        cfg = shown.config
        e = discord.Embed(title=_("Game settings here"), colour=INFO)
        e.add_field(name=_("Film"), value=cfg.film.title_in() if cfg.film else _("none (choose one with /admin film)"), inline=False)
        cast = ", ".join(cfg.film.character_name_in(c.id) for c in cfg.cast()) if cfg.film else ""
        e.add_field(name=_("Playable"), value=fit(cast, FIELD_VALUE_MAX) or _("nobody"), inline=False)
        lim = cfg.limits
        # TRANSLATORS: /admin show's limits: "cooldown 30 s · backlog 3 · 300 characters"
        e.add_field(name=_("Limits"), value=_("cooldown %(cooldown)s · backlog %(backlog)s · %(length)s",
                                              cooldown=_seconds(lim.cooldown_seconds), backlog=number(lim.backlog_cap),
                                              length=ngettext("%(n)s character", "%(n)s characters", lim.max_instruction_len)),
                    inline=False)
        e.add_field(name=_("Admin roles"), value=_mentions(cfg.admin_role_ids) or _("none"), inline=True)
        e.add_field(name=_("Moderator roles"), value=_mentions(cfg.moderator_role_ids) or _("none"), inline=True)
        e.add_field(name=_("Public posts' language"), value=_language_shown(shown, interaction), inline=False)
        e.add_field(name=_("Previews"), value=_previews_shown(shown), inline=False)
        e.add_field(name=_("Share of the GPU"), value=fit(_share_shown(shown.share), FIELD_VALUE_MAX), inline=False)
        e.add_field(name=_("Usage (turns, GPU time; days in UTC)"), value=fit(_usage_shown(shown.share), FIELD_VALUE_MAX),
                    inline=False)
        # Names and mentions, never bare ids (mentions in an embed render as names and never ping).
        log_lines = []
        for a in shown.recent:
            line = bot_audit.describe(a)
            if sum(len(x) + 1 for x in log_lines) + len(line) > 1024:  # an embed field's limit
                break
            log_lines.append(line)
        e.add_field(name=_("Recent actions"), value="\n".join(log_lines) or _("none"), inline=False)
        await interaction.followup.send(embed=e, ephemeral=True)


def _previews_shown(shown: admin.Shown) -> str:
    if shown.previews_default:
        return _("on (the bot's default)") if shown.previews else _("off (the bot's default)")
    return _("on") if shown.previews else _("off")


def _share_shown(share: ServerShare) -> str:
    """The server's weight in the fair order, its quotas in force and its turns of the last hour."""
    q = share.quotas
    server = (ngettext("%(n)s turn an hour for the server", "%(n)s turns an hour for the server", q.server) if q.server
              else _("no hourly quota for the server"))
    member = (ngettext("%(n)s turn an hour for each member", "%(n)s turns an hour for each member", q.member) if q.member
              else _("no hourly quota for each member"))
    # TRANSLATORS: /admin show: a server's weight in the order turns are taken in (1 is everyone's, 2 twice as many turns)
    weight = _("weight %(weight)s", weight=number(q.weight))
    last = ngettext("%(n)s turn in the last hour", "%(n)s turns in the last hour", share.last_hour)
    return " · ".join((weight, server, member, last))


def _usage_shown(share: ServerShare) -> str:
    """One line per day: "2026-12-03: 12 turns · 4 minutes"."""
    # TRANSLATORS: /admin show, one day's usage: "2026-12-03: 12 turns · 4 minutes" (the GPU time)
    lines = [_("%(day)s: %(turns)s · %(gpu)s", day=day(u.day),
               turns=ngettext("%(n)s turn", "%(n)s turns", u.turns), gpu=wait_text(u.gpu_seconds))
             for u in share.usage]
    return "\n".join(lines) or _("none")


def _language_shown(shown: admin.Shown, interaction: Interaction) -> str:
    """Where the public posts' language here comes from: this channel's choice, the server's,
    or Discord's server language."""
    if shown.language is not None and shown.language_scope == "channel":
        return _("%(language)s (this channel's choice)", language=autonym(shown.language))
    if shown.language is not None:
        return _("%(language)s (this server's choice)", language=autonym(shown.language))
    return _("%(language)s (automatic: Discord's server language)",
             language=autonym(locales.resolve(interaction.guild_locale)))


def _mentions(role_ids) -> str:
    """Roles as mentions (names in an embed, never a ping), as many as a field holds."""
    out = ""
    for r in sorted(role_ids):
        more = f"{out} <@&{r}>" if out else f"<@&{r}>"
        if len(more) > FIELD_VALUE_MAX - 2:
            return out + " …"
        out = more
    return out


def _seconds(seconds: float) -> str:
    # TRANSLATORS: a number of seconds, abbreviated ("30 s")
    return _("%(seconds)s s", seconds=number(seconds))


def _limits_text(lim) -> str:
    return _("Limits: cooldown %(cooldown)s, backlog %(backlog)s, instructions up to %(length)s.",
             cooldown=_seconds(lim.cooldown_seconds),
             backlog=ngettext("%(n)s turn", "%(n)s turns", lim.backlog_cap),
             length=ngettext("%(n)s character", "%(n)s characters", lim.max_instruction_len))


def _looser(name: str, asked: float) -> str:
    """A limit an admin asked for that the operator's does not allow."""
    if name == "cooldown_seconds":
        return _("a cooldown of %(seconds)s", seconds=_seconds(asked))
    if name == "backlog_cap":
        return _("a backlog of %(backlog)s", backlog=number(asked))
    return ngettext("%(n)s character", "%(n)s characters", int(asked))


def _role_text(role: str, kind: str, enabled: bool) -> str:
    if kind == "admin":
        if enabled:
            return _("%(role)s now has the bot's admin rights.", role=role)
        return _("%(role)s no longer has the bot's admin rights.", role=role)
    if enabled:
        return _("%(role)s now has the bot's moderator rights.", role=role)
    return _("%(role)s no longer has the bot's moderator rights.", role=role)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Admin(bot))
