"""Audit-log entries for actions taken through Discord: the actor and place come from the interaction."""

from __future__ import annotations

import logging

import discord

from bot import context
from db import audit
from game.errors import ContentRefused

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
                         rule_set=refused.rule_set, term=refused.term, text=refused.text)
    except Exception as e:
        log.warning("could not record a refused %s in the audit log: %s", refused.what, e)


def _name(text) -> str:
    """Stored free text (a member's or role's name, a reason) shown as typed: no Markdown, and
    nothing that Discord would turn into a mention."""
    return discord.utils.escape_mentions(discord.utils.escape_markdown(str(text or "")))


def _user(user_id, name) -> str:
    return f"<@{int(user_id)}> ({_name(name)})" if str(user_id or "").isdigit() else _name(name)


def _role(role_id, name) -> str:
    return f"<@&{int(role_id)}> ({_name(name)})" if str(role_id or "").isdigit() else _name(name)


def describe(entry) -> str:
    """One audit-log entry as /admin show lists it: when, who (a mention, which never pings in an
    embed, and the name stored at the time), what, where; ids only inside mentions."""
    from game.catalogue import FILMS

    d = entry.details or {}
    target = entry.target
    film = FILMS.get(target) if target else None
    character = next((c.name for f in FILMS.values() for c in f.characters if c.id == target), target)
    limits = ", ".join(
        f"{label} {d[key]:g}{unit}" for key, label, unit in (("cooldown", "cooldown", " s"), ("backlog", "backlog", ""),
                                                             ("max_length", "length", " characters"))
        if isinstance(d.get(key), (int, float))
    )
    kind = "admin" if "admin" in entry.action else "moderator"
    what = {
        "set_film": lambda: f"set the film to {film.title if film else _name(target)}" + (" in this channel" if d.get("scope") == "channel" else ""),
        "enable_character": lambda: f"made {_name(character)} playable",
        "disable_character": lambda: f"made {_name(character)} unplayable",
        "set_limits": lambda: f"set the limits ({limits or 'unchanged'})",
        "add_admin_role": lambda: f"gave the bot's {kind} rights to {_role(target, d.get('role'))}",
        "add_moderator_role": lambda: f"gave the bot's {kind} rights to {_role(target, d.get('role'))}",
        "remove_admin_role": lambda: f"took the bot's {kind} rights from {_role(target, d.get('role'))}",
        "remove_moderator_role": lambda: f"took the bot's {kind} rights from {_role(target, d.get('role'))}",
        "pause": lambda: "paused the game" + (f" ({_name(d['reason'])})" if d.get("reason") else ""),
        "resume": lambda: "resumed the game",
        "reset": lambda: f"reset the game ({d.get('cancelled', 0)} waiting turn(s) cancelled)",
        "cancel_turn": lambda: f"cancelled {_name(target)}" + (f" ({_name(d['reason'])})" if d.get("reason") else ""),
        "regenerate_turn": lambda: f"regenerated {_name(target)}",
        "kick": lambda: f"removed {_user(target, d.get('player'))} from the game",
        "instruction_refused": lambda: f"had an instruction refused by {_name(d.get('rule_set'))} in {_name(target)}",
        "reason_refused": lambda: f"had a reason refused by {_name(d.get('rule_set'))} in {_name(target)}",
        "filter_add": lambda: f"added {_name(target)} to this server's filter",
        "filter_remove": lambda: f"removed {_name(target)} from this server's filter",
        "remove_shot": lambda: f"removed {_name(target)}" + (" (their own)" if d.get("by") == "author" else "")
        + (f" ({_name(d['reason'])})" if d.get("reason") and d.get("by") != "author" else ""),
        "report_shot": lambda: f"reported {_name(target)} by {_user(d.get('author_id'), d.get('author'))}",
        "log_channel": lambda: f"set the moderation log to <#{int(target)}>" if str(target or "").isdigit() else "turned the moderation log off",
        "vote_mode": lambda: f"turned vote mode {_name(target)}" + (f" ({d['round_seconds']} s rounds)" if target == "on" else ""),
    }.get(entry.action, lambda: _name(entry.action.replace("_", " ")) + (f" {_name(target)}" if target else ""))()
    where = f" in <#{entry.channel_id}>" if entry.channel_id else ""
    when = f"<t:{int(entry.created_at.timestamp())}:R>" if entry.created_at else ""
    return f"{when} {_user(entry.actor_id, entry.actor_name)} {what}{where}".strip()
