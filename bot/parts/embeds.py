"""Embeds the bot posts. Player text (instructions, names) goes through `esc` wherever it is shown:
Markdown escaped and mention syntax broken, so a name like `<@123>` or `@everyone` shows as typed
rather than as a mention. Mentions are also disabled for every message by the client's
allowed_mentions (so nothing pings even if something slipped through).

Every label is rendered in the locale current when the embed is built: the member's for an
answer, the server's for a public post (bot.parts.locale.public, around the build). Translations can be
much longer than the English, so every text is fitted to Discord's limits after rendering
(`fit`, `fit_embed`, `fit_label`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import discord
from discord.utils import escape_markdown, escape_mentions

from game import turn_texts
from game.catalogue import Film
from game.sanitize import clean_text
from game.states import STATE_NAMES, CharacterState, bar, state_label
from game.texts import turn_status as status_label
from i18n import Lazy, _, pgettext
from i18n.formatting import number, percent
from i18n.translate import Lp_
from service.names import STAND_INS, shown_name

DONE, FAILED, PREVIEW, WAITING, INFO = 0x2ECC71, 0xE74C3C, 0xE67E22, 0x95A5A6, 0x3498DB

# Discord's limits, in characters, on what a message shows.
TITLE_MAX, FIELD_NAME_MAX, FIELD_VALUE_MAX, FOOTER_MAX, DESCRIPTION_MAX = 256, 256, 1024, 2048, 4096
EMBED_MAX, CONTENT_MAX, LABEL_MAX = 6000, 2000, 80


def fit(text: object, limit: int) -> str:
    """A rendered text cut to `limit` characters, with an ellipsis where it was cut."""
    s = str(text)
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def fit_label(text: object) -> str:
    """A button's label (at most 80 characters)."""
    return fit(text, LABEL_MAX)


def fit_embed(e: discord.Embed) -> discord.Embed:
    """Hold an embed to Discord's limits once its texts are rendered: each part to its own limit,
    then the whole to 6,000 characters (the description, then the last fields' values shrink)."""
    if e.title:
        e.title = fit(e.title, TITLE_MAX)
    if e.description:
        e.description = fit(e.description, DESCRIPTION_MAX)
    for i, f in enumerate(e.fields):
        e.set_field_at(i, name=fit(f.name or "\u200b", FIELD_NAME_MAX), value=fit(f.value or "\u200b", FIELD_VALUE_MAX),
                       inline=bool(f.inline))
    if e.footer.text:
        e.set_footer(text=fit(e.footer.text, FOOTER_MAX), icon_url=e.footer.icon_url)
    over = len(e) - EMBED_MAX
    if over > 0 and e.description:
        e.description = fit(e.description, max(1, len(e.description) - over))
        over = len(e) - EMBED_MAX
    for i in reversed(range(len(e.fields))):
        if over <= 0:
            break
        f = e.fields[i]
        value = str(f.value)
        e.set_field_at(i, name=str(f.name), value=fit(value, max(1, len(value) - over)), inline=bool(f.inline))
        over = len(e) - EMBED_MAX
    return e


# `<@id>`, `<@!id>`, `<@&role>`, `<#channel>`, `<:emoji:id>`, `<a:…>`, `<t:…>`, `</command:id>`, `<id:…>`:
# a zero-width space after the `<` keeps Discord from rendering them.
_ANGLE_MARKUP = re.compile(r"<(?=[@#:/]|a:|t:|id:)")


def esc(text: str | None) -> str:
    """Player text for display: no control or invisible characters, no Markdown, no mention or
    other `<…>` markup (what is stored is already clean; a name straight from Discord is not)."""
    return _ANGLE_MARKUP.sub("<\u200b", escape_mentions(escape_markdown(clean_text(text, 4000))))


def person(name: str | None) -> str:
    """A stored display name, for display: a stand-in the bot stores in place of a name in the
    current language (service.names), else the name escaped for Discord's markup."""
    if name and name in STAND_INS:
        return str(shown_name(name))
    return esc(name)


def character_name(film: Film, character_id: str) -> str:
    """A character's name as the current language knows it (the film's local names, else English)."""
    return film.character_name_in(character_id)


def film_title(film: Film) -> str:
    """A film's title as the current language knows it (its local title, else the English one)."""
    return film.title_in()


def state_line(name: str, before: int | None, after: int) -> str:
    """`Stamina ███████░░░ 70 (+10)` in the current language; the change is omitted when unknown."""
    change = "" if before is None else f" ({'+' if after >= before else ''}{number(after - before)})"
    return f"{state_label(name)} {bar(after)} {number(after)}{change}"


def _state_lines(before: Mapping[str, int] | None, after: Mapping[str, int]) -> str:
    return "\n".join(state_line(n, None if before is None else before.get(n), after[n]) for n in STATE_NAMES)


# The stages a worker reports with its progress (inference.backends, inference.decoder), as shown.
STAGES: dict[str, Lazy] = {
    "mllm": Lp_("progress stage", "imagining the scene"),
    "decode": Lp_("progress stage", "drawing the frames"),
    "vae": Lp_("progress stage", "decoding the frames"),
    "encode": Lp_("progress stage", "encoding the clip"),
    "done": Lp_("progress stage", "finishing"),
    "preview rules": Lp_("progress stage", "applying the preview's rules"),
}
_STEP = re.compile(r"(?P<what>render|denoise) (?P<done>\d+)/(?P<total>\d+)")


def stage_text(stage: str) -> str:
    """A worker's progress stage (a code, stored and sent as the worker names it) in the current language."""
    shown = STAGES.get(stage)
    if shown is not None:
        return str(shown)
    m = _STEP.fullmatch(stage)
    if m is not None:
        done, total = number(int(m["done"])), number(int(m["total"]))
        if m["what"] == "render":
            return pgettext("progress stage", "drawing frame %(done)s of %(total)s", done=done, total=total)
        return pgettext("progress stage", "refining, step %(done)s of %(total)s", done=done, total=total)
    # TRANSLATORS: a progress stage the bot has no name for; %(stage)s is the worker's own word for it
    return pgettext("progress stage", "working (%(stage)s)", stage=esc(stage))


def failure_text(error: str | None) -> str:
    """A failed turn's stored reason in the current language (game.turn_texts), escaped for display."""
    return turn_texts.failure_text(error, quote=esc)


def turn_status(status: str) -> str:
    """A turn's stored status in the current language (game.errors names them)."""
    return esc(str(status_label(status)))


# What each embed reads of what it shows, typed by the attributes it reads: the service's values
# (service.posting.Post, service.status.StatusTurn) and the turns its actions return fit them alike.
class Shown(Protocol):
    """What a status message shows of a turn (the status board's Card is one too)."""

    @property
    def seq(self) -> int: ...

    @property
    def instruction(self) -> str: ...

    @property
    def author_name(self) -> str: ...


class Listed(Shown, Protocol):
    """A turn as /history lists it."""

    @property
    def status(self) -> str: ...


class Finished(Shown, Protocol):
    """A finished or failed turn as its post shows it."""

    @property
    def is_preview(self) -> bool: ...

    @property
    def motion_scope(self) -> float | None: ...

    @property
    def motion_level(self) -> int | None: ...

    @property
    def characters(self) -> Sequence[str]: ...

    @property
    def states_before(self) -> dict | None: ...

    @property
    def states_after(self) -> dict | None: ...

    @property
    def error(self) -> str | None: ...


class Played(Protocol):
    """A game as /status heads it."""

    @property
    def status(self) -> str: ...

    @property
    def next_seq(self) -> int: ...


class Playing(Protocol):
    """A member playing a character, as /status names them."""

    @property
    def character_id(self) -> str: ...

    @property
    def user_name(self) -> str: ...


def turn_embed(turn: Finished, film: Film, *, clip_note: str | None = None) -> discord.Embed:
    """A finished turn: instruction, author, number, motion scope and each acting character's bars."""
    title = _("Turn #%(seq)s · preview", seq=turn.seq) if turn.is_preview else _("Turn #%(seq)s", seq=turn.seq)
    e = discord.Embed(title=title, description=esc(turn.instruction), colour=PREVIEW if turn.is_preview else DONE)
    e.add_field(name=_("Author"), value=person(turn.author_name), inline=True)
    e.add_field(name=_("Motion scope"), value=_("%(scope)s (motion level %(level)s)", scope=number(turn.motion_scope or 0),
                                                level=number(turn.motion_level or 0)), inline=True)
    before, after = turn.states_before or {}, turn.states_after or {}
    for cid in turn.characters:
        if cid in after:
            e.add_field(name=esc(character_name(film, cid)), value=_state_lines(before.get(cid), after[cid]), inline=False)
    if clip_note:
        e.add_field(name=_("Clip"), value=clip_note, inline=False)
    if turn.is_preview:
        e.set_footer(text=_("Preview clip from the preview backend, not generated by the AnimeGamer model · %(film)s",
                            film=film_title(film)))
    else:
        e.set_footer(text=film_title(film))
    return fit_embed(e)


def failed_embed(turn: Finished, film: Film) -> discord.Embed:
    e = discord.Embed(title=_("Turn #%(seq)s failed", seq=turn.seq), description=esc(turn.instruction), colour=FAILED)
    e.add_field(name=_("Author"), value=person(turn.author_name), inline=True)
    e.add_field(name=_("Reason"), value=failure_text(turn.error), inline=False)
    e.set_footer(text=_("The characters are unchanged. The author or a moderator can try again with Regenerate · %(film)s",
                        film=film_title(film)))
    return fit_embed(e)


def progress_text(fraction: float, stage: str | None) -> str:
    pct = round(max(0.0, min(1.0, fraction)) * 100)
    shown = f"{bar(pct)} {percent(pct / 100)}"
    return f"{shown} · {stage_text(stage)}" if stage else shown


# The titles of a turn's status message, by the state it shows (bot.parts.status, bot.parts.notifier, the cogs).
_STATUS_TITLES = {
    "queued": lambda seq: _("Turn #%(seq)s · queued", seq=seq),
    "generating": lambda seq: _("Turn #%(seq)s · generating", seq=seq),
    "cancelled": lambda seq: _("Turn #%(seq)s · cancelled", seq=seq),
    "not posted": lambda seq: _("Turn #%(seq)s · not posted", seq=seq),
    "failed": lambda seq: _("Turn #%(seq)s · failed", seq=seq),
}




def status_embed(
    turn: Shown,
    *,
    state: str,
    position: int | None = None,
    progress: float | None = None,
    stage: str | None = None,
    note: str | Lazy | None = None,
) -> discord.Embed:
    """The in-place status message of a turn (or of the status board's Card of it): queued (with its
    position), running (a bar), then finished, cancelled or failed. `note` may be lazy: it is
    rendered here, in the locale of the message."""
    titled = _STATUS_TITLES.get(state)
    title = titled(turn.seq) if titled else _("Turn #%(seq)s · %(state)s", seq=turn.seq, state=esc(state))
    e = discord.Embed(title=title, description=esc(turn.instruction), colour=WAITING)
    e.add_field(name=_("Author"), value=person(turn.author_name), inline=True)
    if position is not None:
        e.add_field(name=_("Queue position"), value=number(position), inline=True)
    if progress is not None:
        e.add_field(name=_("Progress"), value=progress_text(progress, stage), inline=False)
    if note:
        e.add_field(name=_("Note"), value=str(note), inline=False)
    return fit_embed(e)


def states_embed(
    gs: Played, film: Film, states: Mapping[str, CharacterState], players: Iterable[Playing]
) -> discord.Embed:
    """/status: every character of the game with its bars and who plays it."""
    by_char = {p.character_id: p for p in players}
    title = _("%(film)s · paused", film=film_title(film)) if gs.status == "paused" else film_title(film)
    description = _("Next turn: #%(seq)s", seq=gs.next_seq)
    if not states:
        description += "\n" + _("Nobody has joined yet: pick a character with /game join.")
    e = discord.Embed(title=title, colour=INFO, description=description)
    for cid, st in states.items():
        who = by_char.get(cid)
        name = esc(character_name(film, cid))
        if who:
            # TRANSLATORS: a character of the film and the member who plays it
            name = _("%(character)s — %(player)s", character=name, player=person(who.user_name))
        e.add_field(name=name, value=_state_lines(None, st.as_dict()), inline=False)
    return fit_embed(e)


def history_embed(turns: Iterable[Listed], film: Film, *, label: str | None = None) -> discord.Embed:
    if label:
        title = _("History · %(film)s · %(label)s", film=film_title(film), label=label)
    else:
        title = _("History · %(film)s", film=film_title(film))
    e = discord.Embed(title=title, colour=INFO)
    lines = [f"**#{t.seq}** {person(t.author_name)} · {turn_status(t.status)}\n{esc(t.instruction)}" for t in turns]
    description = "\n".join(lines) or _("No turns yet. Play one with /act.")
    if len(description) > 4000:  # the latest turns are kept
        description = description[-4000:]
    e.description = description
    return fit_embed(e)
