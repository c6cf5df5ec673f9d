"""The audit log as the bot shows it (the service records the entries: service.deps.Deps.record):
one registry of the audited actions, each with its code, its title and colour in the moderation
log channel, and its sentences with named parameters.

An entry is stored as codes and values (its action's code, a target, details: ids, numbers, what
people typed), never as a sentence; `describe` renders it in the current language, the member's in
/admin show, the server's in the moderation log channel (bot.answers.modlog). The play page keeps no
audit log.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import babel
import discord

from bot.parts.embeds import FAILED, INFO, PREVIEW
from game.content_rules import stored_rule_set_label
from i18n import L_, Lazy, _, current_locale, locales, ngettext, pgettext, use_locale
from i18n.formatting import number
from i18n.translate import Ln_, Lp_

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sentence:
    """One way to say an action: `text` names its parameters (`%(who)s`, the actor, always); it
    is said when the entry has every one of them, and its target is `if_target` (when given) and
    its details hold `if_detail` (a (key, value) pair, when given). A plural text counts `n`."""

    text: Lazy
    if_target: str | None = None
    if_detail: tuple[str, str] | None = None


@dataclass(frozen=True)
class Action:
    """An audited action: `title` and `colour` in the moderation log, `target`: the parameter its
    stored target fills, `sentences`: the first that fits the entry is said."""

    title: Lazy
    colour: int
    sentences: tuple[Sentence, ...]
    target: str | None = None


def _says(*texts: Lazy | Sentence) -> tuple[Sentence, ...]:
    return tuple(t if isinstance(t, Sentence) else Sentence(t) for t in texts)


_REFUSED = Lp_("moderation log", "Instruction refused")
ACTIONS: dict[str, Action] = {
    "set_film": Action(Lp_("moderation log", "Set film"), INFO, _says(
        Sentence(L_("%(who)s set the film to %(film)s in this channel"), if_detail=("scope", "channel")),
        L_("%(who)s set the film to %(film)s")), target="film"),
    "enable_character": Action(Lp_("moderation log", "Enable character"), INFO, _says(
        L_("%(who)s made %(character)s playable")), target="character"),
    "disable_character": Action(Lp_("moderation log", "Disable character"), INFO, _says(
        L_("%(who)s made %(character)s unplayable")), target="character"),
    "set_limits": Action(Lp_("moderation log", "Set limits"), INFO, _says(
        L_("%(who)s set the limits (%(limits)s)"), L_("%(who)s set the limits (unchanged)"))),
    "add_admin_role": Action(Lp_("moderation log", "Add admin role"), INFO, _says(
        L_("%(who)s gave the bot's admin rights to %(role)s")), target="role"),
    "add_moderator_role": Action(Lp_("moderation log", "Add moderator role"), INFO, _says(
        L_("%(who)s gave the bot's moderator rights to %(role)s")), target="role"),
    "remove_admin_role": Action(Lp_("moderation log", "Remove admin role"), INFO, _says(
        L_("%(who)s took the bot's admin rights from %(role)s")), target="role"),
    "remove_moderator_role": Action(Lp_("moderation log", "Remove moderator role"), INFO, _says(
        L_("%(who)s took the bot's moderator rights from %(role)s")), target="role"),
    "pause": Action(Lp_("moderation log", "Pause"), INFO, _says(
        L_("%(who)s paused the game (%(reason)s)"), L_("%(who)s paused the game"))),
    "resume": Action(Lp_("moderation log", "Resume"), INFO, _says(L_("%(who)s resumed the game"))),
    "reset": Action(Lp_("moderation log", "Reset"), INFO, _says(
        Ln_("%(who)s reset the game (%(n)s waiting turn cancelled)",
            "%(who)s reset the game (%(n)s waiting turns cancelled)", 0))),
    "cancel_turn": Action(Lp_("moderation log", "Cancel turn"), INFO, _says(
        L_("%(who)s cancelled %(turn)s (%(reason)s)"), L_("%(who)s cancelled %(turn)s")), target="turn"),
    "regenerate_turn": Action(Lp_("moderation log", "Regenerate turn"), INFO, _says(
        L_("%(who)s regenerated %(turn)s")), target="turn"),
    "kick": Action(Lp_("moderation log", "Kick"), INFO, _says(L_("%(who)s removed %(player)s from the game")), target="player"),
    "instruction_refused": Action(_REFUSED, PREVIEW, _says(
        L_("%(who)s had an instruction refused by %(rules)s in %(command)s")), target="command"),
    "reason_refused": Action(Lp_("moderation log", "Reason refused"), PREVIEW, _says(
        L_("%(who)s had a reason refused by %(rules)s in %(command)s")), target="command"),
    "filter_add": Action(Lp_("moderation log", "Filter add"), INFO, _says(
        L_("%(who)s added %(term)s to this server's filter")), target="term"),
    "filter_remove": Action(Lp_("moderation log", "Filter remove"), INFO, _says(
        L_("%(who)s removed %(term)s from this server's filter")), target="term"),
    "remove_shot": Action(Lp_("moderation log", "Shot removed"), FAILED, _says(
        Sentence(L_("%(who)s removed %(turn)s (their own)"), if_detail=("by", "author")),
        L_("%(who)s removed %(turn)s (%(reason)s)"), L_("%(who)s removed %(turn)s")), target="turn"),
    "report_shot": Action(Lp_("moderation log", "Shot reported"), PREVIEW, _says(
        L_("%(who)s reported %(turn)s by %(author)s")), target="turn"),
    "log_channel": Action(Lp_("moderation log", "Log channel"), INFO, _says(
        L_("%(who)s set the moderation log to %(channel)s"),
        L_("%(who)s turned the moderation log off")), target="channel"),
    "vote_mode": Action(Lp_("moderation log", "Vote mode"), INFO, _says(
        Sentence(L_("%(who)s turned vote mode on (%(seconds)s s rounds)"), if_target="on"),
        Sentence(L_("%(who)s turned vote mode on"), if_target="on"),
        Sentence(L_("%(who)s turned vote mode off"), if_target="off"))),
    "previews": Action(Lp_("moderation log", "Previews"), INFO, _says(
        Sentence(L_("%(who)s turned previews of clips being made on"), if_target="on"),
        Sentence(L_("%(who)s turned previews of clips being made off"), if_target="off"))),
    # /admin language: a catalog's code, or "auto" (Discord's server language); `channel` in details
    "set_language": Action(Lp_("moderation log", "Language"), INFO, _says(
        Sentence(L_("%(who)s made the public posts in %(channel)s follow the server's language"), if_target="auto"),
        Sentence(L_("%(who)s made the public posts follow Discord's server language"), if_target="auto"),
        L_("%(who)s set the language of the public posts in %(channel)s to %(language)s"),
        L_("%(who)s set the language of the public posts to %(language)s")), target="language"),
}
# Any other text the content rules refused (`<what>_refused`, bot.answers.replies.record_refusal).
TEXT_REFUSED = Action(_REFUSED, PREVIEW, _says(L_("%(who)s had a text refused by %(rules)s in %(command)s")),
                      target="command")


def action_of(code: str) -> Action | None:
    return ACTIONS.get(code) or (TEXT_REFUSED if code.endswith("_refused") else None)


def title_of(code: str) -> tuple[str, int]:
    """An action's title in the moderation log (in the current language) and its colour."""
    action = action_of(code)
    if action is not None:
        return str(action.title), action.colour
    # TRANSLATORS: the title of a moderation log entry the bot has no title for; %(action)s is its code
    return _("Action: %(action)s", action=_name(code.replace("_", " "))), INFO


# --- recording: a rule set as the entry of a refused text names it


def rule_set_name(text) -> str:
    """A rule set's English name (game.content_rules names rule sets in English), which
    game.content_rules.rule_set_code turns into what is stored."""
    with use_locale(locales.SOURCE):
        return str(text)


# --- the parameters, from what is stored


def _name(text) -> str:
    """Stored free text (a member's or role's name, a reason) shown as typed: no Markdown, and
    nothing that Discord would turn into a mention."""
    return discord.utils.escape_mentions(discord.utils.escape_markdown(str(text or "")))


def user_text(user_id, name) -> str:
    """A member: a mention (which never pings in an embed) and the name stored at the time."""
    return f"<@{int(user_id)}> ({_name(name)})" if str(user_id or "").isdigit() else _name(name)


def _role(role_id, name) -> str:
    return f"<@&{int(role_id)}> ({_name(name)})" if str(role_id or "").isdigit() else _name(name)


def _channel(channel_id) -> str | None:
    return f"<#{int(channel_id)}>" if str(channel_id or "").isdigit() else None


def turn_text(seq) -> str:
    """A turn, stored as its number in the session."""
    return _("turn #%(seq)s", seq=int(seq)) if str(seq or "").isdigit() else _name(seq)


def rule_set_text(stored, rule=None) -> str:
    """A stored rule set (game.content_rules.rule_set_code: a code, and an AutoMod rule's name) in
    the current language."""
    return _name(stored_rule_set_label(str(stored), None if rule is None else str(rule))) if stored else ""


def language_name(code) -> str:
    """A catalog's language named in the current language ("Japanese", "japonais")."""
    try:
        shown = babel.Locale.parse(locales.babel_locale(str(code)))
        return shown.get_display_name(locales.babel_locale(current_locale())) or _name(code)
    except (ValueError, TypeError, babel.UnknownLocaleError):
        return _name(code)


def _film(film_id) -> str:
    from game.catalogue import FILMS

    film = FILMS.get(film_id) if film_id else None
    return film.title_in() if film else _name(film_id)


def _character(character_id) -> str:
    from game.catalogue import FILMS

    return _name(next((f.character_name_in(c.id) for f in FILMS.values() for c in f.characters
                       if c.id == character_id), character_id))


def _limits(d: dict) -> str | None:
    """The limits an admin set (`/admin limits`), as a list in the current language."""
    parts = []
    if isinstance(d.get("cooldown"), (int, float)):
        parts.append(_("cooldown %(seconds)s s", seconds=number(d["cooldown"])))
    if isinstance(d.get("backlog"), (int, float)):
        parts.append(_("backlog %(count)s", count=number(d["backlog"])))
    if isinstance(d.get("max_length"), (int, float)):
        parts.append(ngettext("length %(n)s character", "length %(n)s characters", int(d["max_length"])))
    # TRANSLATORS: what separates the items of a short list ("cooldown 30 s, backlog 2")
    return pgettext("list separator", ", ").join(parts) or None


def _count(value) -> int:
    return value if isinstance(value, int) else 0


# The target's rendering, by the parameter it fills (Action.target); None: the parameter is absent.
_TARGETS = {
    "film": lambda t, d: _film(t),
    "character": lambda t, d: _character(t),
    "role": lambda t, d: _role(t, d.get("role")),
    "turn": lambda t, d: turn_text(t),
    "player": lambda t, d: user_text(t, d.get("player")),
    "command": lambda t, d: _name(t),
    "term": lambda t, d: _name(t),
    "channel": lambda t, d: _channel(t),
    "language": lambda t, d: language_name(t),
}
# Parameters from the details (the stored keys they read).
_DETAILS = {
    "reason": lambda d: _name(d["reason"]) if d.get("reason") else None,
    "rules": lambda d: rule_set_text(d.get("rule_set"), d.get("rule")),
    "limits": _limits,
    "n": lambda d: _count(d.get("cancelled", 0)),
    "author": lambda d: user_text(d.get("author_id"), d.get("author")),
    "channel": lambda d: _channel(d.get("channel")),
    "seconds": lambda d: number(d["round_seconds"]) if isinstance(d.get("round_seconds"), (int, float)) else None,
}


def _fits(sentence: Sentence, params: dict, target, details: dict) -> bool:
    if sentence.if_target is not None and target != sentence.if_target:
        return False
    if sentence.if_detail is not None and details.get(sentence.if_detail[0]) != sentence.if_detail[1]:
        return False
    return all(params.get(name) is not None for name in _placeholders(sentence.text))


def _placeholders(text: Lazy) -> set[str]:
    return set(re.findall(r"%\((\w+)\)s", text.msgid + (text.plural or "")))


def _what(entry, who: str) -> str:
    """The entry as a sentence about its actor `who`, in the current language."""
    action = action_of(entry.action)
    if action is not None:
        d = entry.details if isinstance(entry.details, dict) else {}
        params: dict[str, object] = {"who": who, **{name: read(d) for name, read in _DETAILS.items()}}
        if action.target is not None:
            params[action.target] = _TARGETS[action.target](entry.target, d) if entry.target else None
        for sentence in action.sentences:
            if _fits(sentence, params, entry.target, d):
                named = {k: v for k, v in params.items() if k in _placeholders(sentence.text)}
                if sentence.text.plural is not None:
                    n = int(named.pop("n"))  # type: ignore[arg-type]
                    return ngettext(sentence.text.msgid, sentence.text.plural, n, **named)
                return _(sentence.text.msgid, **named)
    code = _name(entry.action.replace("_", " "))
    if entry.target:
        # TRANSLATORS: an audit entry the bot has no sentence for: its actor, its action's code and target
        return _("%(who)s: %(action)s (%(target)s)", who=who, action=code, target=_name(entry.target))
    return _("%(who)s: %(action)s", who=who, action=code)


def describe(entry) -> str:
    """One audit-log entry as /admin show lists it, in the current language: when, who (a mention,
    which never pings in an embed, and the name stored at the time), what, where; ids only inside
    mentions."""
    what = _what(entry, user_text(entry.actor_id, entry.actor_name))
    if entry.channel_id:
        channel = f"<#{entry.channel_id}>"
        # TRANSLATORS: an audit entry (a sentence) and the channel where it happened
        what = _("%(entry)s in %(channel)s", entry=what, channel=channel)
    when = f"<t:{int(entry.created_at.timestamp())}:R>" if entry.created_at else ""
    return f"{when} {what}".strip()
