"""Audit-log entries for actions taken through Discord: the actor and place come from the interaction.

What is stored stays as it was recorded (codes, English names the bot chose, what people typed);
`describe` renders an entry in the current language: the member's in /admin show, the server's in
the moderation log channel (bot.modlog)."""

from __future__ import annotations

import logging
import re

import babel
import discord

from bot import context
from db import audit
from game.content_rules import OPERATOR, SERVER_FILTER
from game.errors import ContentRefused
from i18n import _, current_locale, locales, ngettext, pgettext, use_locale
from i18n.formatting import number

log = logging.getLogger(__name__)


async def record(s, interaction: discord.Interaction, action: str, target: str | None = None, **details) -> None:
    await audit.record(
        s,
        guild_id=context.guild_id(interaction),
        channel_id=interaction.channel_id,
        actor_id=interaction.user.id,
        actor_name=interaction.user.display_name,
        action=action,
        target=target,
        details=details,
    )


async def record_refusal(interaction: discord.Interaction, refused: ContentRefused) -> None:
    """A text the content rules refused (`<what>_refused`: instruction_refused, reason_refused),
    in a transaction of its own: the command's was rolled back with the refusal. Best effort: a
    database that is down loses the entry, never the member's answer."""
    command = interaction.command.qualified_name if interaction.command else None
    try:
        async with context.bot_of(interaction).db.sessions.begin() as s:
            await record(s, interaction, f"{refused.what}_refused", command and f"/{command}",
                         rule_set=_source(refused.rule_set), term=refused.term, text=refused.text)
    except Exception as e:
        log.warning("could not record a refused %s in the audit log: %s", refused.what, e)


def _source(text) -> str:
    """Text as stored: in the source language (a lazy rule-set name is rendered in English)."""
    with use_locale(locales.SOURCE):
        return str(text)


def _name(text) -> str:
    """Stored free text (a member's or role's name, a reason) shown as typed: no Markdown, and
    nothing that Discord would turn into a mention."""
    return discord.utils.escape_mentions(discord.utils.escape_markdown(str(text or "")))


def _user(user_id, name) -> str:
    return f"<@{int(user_id)}> ({_name(name)})" if str(user_id or "").isdigit() else _name(name)


def _role(role_id, name) -> str:
    return f"<@&{int(role_id)}> ({_name(name)})" if str(role_id or "").isdigit() else _name(name)


_TURN = re.compile(r"turn #(?P<seq>\d+)")
_AUTOMOD = re.compile(r"this server's AutoMod rule (?P<name>.+)", re.S)


def target_text(target) -> str:
    """An entry's stored target for display: a turn (stored as `turn #N`) in the current language,
    anything else as typed."""
    m = _TURN.fullmatch(str(target or ""))
    if m is not None:
        return _("turn #%(seq)s", seq=int(m["seq"]))
    return _name(target)


def rule_set_text(stored) -> str:
    """A rule set's stored name (game.content_rules names them in English) in the current language."""
    text = str(stored or "")
    if text == _source(OPERATOR):
        return _("the operator's rules")
    if text == _source(SERVER_FILTER):
        return _("this server's filter")
    m = _AUTOMOD.fullmatch(text)
    if m is not None:
        if m["name"] == "without a name":
            return _("this server's AutoMod rule without a name")
        return _("this server's AutoMod rule %(name)s", name=_name(m["name"]))
    return _name(text)


def language_name(code) -> str:
    """A catalog's language named in the current language ("Japanese", "japonais")."""
    try:
        shown = babel.Locale.parse(locales.babel_locale(str(code)))
        return shown.get_display_name(locales.babel_locale(current_locale())) or _name(code)
    except (ValueError, TypeError, babel.UnknownLocaleError):
        return _name(code)


def _limits(d: dict) -> str:
    """The limits an admin set (`/admin limits`), as a list in the current language."""
    parts = []
    if isinstance(d.get("cooldown"), (int, float)):
        parts.append(_("cooldown %(seconds)s s", seconds=number(d["cooldown"])))
    if isinstance(d.get("backlog"), (int, float)):
        parts.append(_("backlog %(count)s", count=number(d["backlog"])))
    if isinstance(d.get("max_length"), (int, float)):
        parts.append(ngettext("length %(n)s character", "length %(n)s characters", int(d["max_length"])))
    # TRANSLATORS: what separates the items of a short list ("cooldown 30 s, backlog 2")
    return pgettext("list separator", ", ").join(parts)


def _what(entry, who: str) -> str:
    """The entry as a sentence about its actor `who`, in the current language."""
    from game.catalogue import FILMS

    d = entry.details or {}
    action, target = entry.action, entry.target
    reason = _name(d["reason"]) if d.get("reason") else None
    if action == "set_film":
        film = FILMS.get(target) if target else None
        title = film.title_in() if film else _name(target)
        if d.get("scope") == "channel":
            return _("%(who)s set the film to %(film)s in this channel", who=who, film=title)
        return _("%(who)s set the film to %(film)s", who=who, film=title)
    if action in ("enable_character", "disable_character"):
        character = _name(next((f.character_name_in(c.id) for f in FILMS.values() for c in f.characters if c.id == target),
                               target))
        if action == "enable_character":
            return _("%(who)s made %(character)s playable", who=who, character=character)
        return _("%(who)s made %(character)s unplayable", who=who, character=character)
    if action == "set_limits":
        limits = _limits(d)
        if not limits:
            return _("%(who)s set the limits (unchanged)", who=who)
        return _("%(who)s set the limits (%(limits)s)", who=who, limits=limits)
    if action in ("add_admin_role", "add_moderator_role", "remove_admin_role", "remove_moderator_role"):
        role = _role(target, d.get("role"))
        return {
            "add_admin_role": lambda: _("%(who)s gave the bot's admin rights to %(role)s", who=who, role=role),
            "add_moderator_role": lambda: _("%(who)s gave the bot's moderator rights to %(role)s", who=who, role=role),
            "remove_admin_role": lambda: _("%(who)s took the bot's admin rights from %(role)s", who=who, role=role),
            "remove_moderator_role": lambda: _("%(who)s took the bot's moderator rights from %(role)s", who=who, role=role),
        }[action]()
    if action == "pause":
        if reason:
            return _("%(who)s paused the game (%(reason)s)", who=who, reason=reason)
        return _("%(who)s paused the game", who=who)
    if action == "resume":
        return _("%(who)s resumed the game", who=who)
    if action == "reset":
        cancelled = d.get("cancelled", 0)
        cancelled = cancelled if isinstance(cancelled, int) else 0
        return ngettext("%(who)s reset the game (%(n)s waiting turn cancelled)",
                        "%(who)s reset the game (%(n)s waiting turns cancelled)", cancelled, who=who)
    if action == "cancel_turn":
        if reason:
            return _("%(who)s cancelled %(turn)s (%(reason)s)", who=who, turn=target_text(target), reason=reason)
        return _("%(who)s cancelled %(turn)s", who=who, turn=target_text(target))
    if action == "regenerate_turn":
        return _("%(who)s regenerated %(turn)s", who=who, turn=target_text(target))
    if action == "kick":
        return _("%(who)s removed %(player)s from the game", who=who, player=_user(target, d.get("player")))
    if action == "instruction_refused":
        return _("%(who)s had an instruction refused by %(rules)s in %(command)s", who=who,
                 rules=rule_set_text(d.get("rule_set")), command=_name(target))
    if action == "reason_refused":
        return _("%(who)s had a reason refused by %(rules)s in %(command)s", who=who,
                 rules=rule_set_text(d.get("rule_set")), command=_name(target))
    if action.endswith("_refused"):
        return _("%(who)s had a text refused by %(rules)s in %(command)s", who=who,
                 rules=rule_set_text(d.get("rule_set")), command=_name(target))
    if action == "filter_add":
        return _("%(who)s added %(term)s to this server's filter", who=who, term=_name(target))
    if action == "filter_remove":
        return _("%(who)s removed %(term)s from this server's filter", who=who, term=_name(target))
    if action == "remove_shot":
        if d.get("by") == "author":
            return _("%(who)s removed %(turn)s (their own)", who=who, turn=target_text(target))
        if reason:
            return _("%(who)s removed %(turn)s (%(reason)s)", who=who, turn=target_text(target), reason=reason)
        return _("%(who)s removed %(turn)s", who=who, turn=target_text(target))
    if action == "report_shot":
        return _("%(who)s reported %(turn)s by %(author)s", who=who, turn=target_text(target),
                 author=_user(d.get("author_id"), d.get("author")))
    if action == "log_channel":
        if str(target or "").isdigit():
            channel = f"<#{int(target)}>"
            return _("%(who)s set the moderation log to %(channel)s", who=who, channel=channel)
        return _("%(who)s turned the moderation log off", who=who)
    if action == "set_language":  # /admin language: a catalog's name, or "auto" (Discord's server language)
        channel = f"<#{int(d['channel'])}>" if str(d.get("channel") or "").isdigit() else None
        if target == "auto":
            if channel:
                return _("%(who)s made the public posts in %(channel)s follow the server's language", who=who, channel=channel)
            return _("%(who)s made the public posts follow Discord's server language", who=who)
        if channel:
            return _("%(who)s set the language of the public posts in %(channel)s to %(language)s", who=who,
                     channel=channel, language=language_name(target))
        return _("%(who)s set the language of the public posts to %(language)s", who=who, language=language_name(target))
    if action == "vote_mode":
        if target == "on":
            seconds = d.get("round_seconds")
            if isinstance(seconds, (int, float)):
                return _("%(who)s turned vote mode on (%(seconds)s s rounds)", who=who, seconds=number(seconds))
            return _("%(who)s turned vote mode on", who=who)
        if target == "off":
            return _("%(who)s turned vote mode off", who=who)
    if target:
        # TRANSLATORS: an audit entry the bot has no sentence for: its actor, its action's code and target
        return _("%(who)s: %(action)s (%(target)s)", who=who, action=_name(action.replace("_", " ")), target=_name(target))
    return _("%(who)s: %(action)s", who=who, action=_name(action.replace("_", " ")))


def describe(entry) -> str:
    """One audit-log entry as /admin show lists it, in the current language: when, who (a mention,
    which never pings in an embed, and the name stored at the time), what, where; ids only inside
    mentions."""
    what = _what(entry, _user(entry.actor_id, entry.actor_name))
    if entry.channel_id:
        channel = f"<#{entry.channel_id}>"
        # TRANSLATORS: an audit entry (a sentence) and the channel where it happened
        what = _("%(entry)s in %(channel)s", entry=what, channel=channel)
    when = f"<t:{int(entry.created_at.timestamp())}:R>" if entry.created_at else ""
    return f"{when} {what}".strip()
