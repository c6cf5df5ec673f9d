"""Taking a shot down from Discord, and what its post shows then.

`/mod remove turn:N reason:...` and the "Remove shot" message command (bot.answers.cogs.shots) both call
`remove`. A moderator may remove any shot of the server; the turn's author may remove their own.
The rule and the transaction (the content taken down, the remove_shot audit entry that reaches the
moderation log, bot.answers.modlog) are the service's (service.shots.remove). Then the post is edited in
place: the video, the embed and the button are replaced by a short notice (the message stays, so
the channel's order is kept), through the channel's edit scheduler like every edit of a post.

The notice is public: it is rendered in the server's language (bot.parts.locale.public); the answer to
the member who removed the shot, in theirs. The notifier re-shows the notice on a post made while
its turn was being taken down; db.privacy's deletions show it too.

The client is typed by what is read of it (`Remover`), not imported, so that the client's parts
(the notifier, bot.parts.privacy) can import this module: no import circle.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal, Protocol

import discord

from bot.parts import locale
from bot.parts.edits import EditScheduler
from bot.parts.embeds import WAITING, esc, fit_embed
from bot.parts.locale import Speaker
from bot.parts.service_args import member, place
from game.stored_reasons import removal_reason
from i18n import L_, Lazy, _
from service import posting, shots
from service.deps import Deps

if TYPE_CHECKING:
    from bot.parts.status import StatusBoard

log = logging.getLogger(__name__)

NOT_REWOUND = L_("The characters keep the states this shot gave them; later turns go on from there.")
_SAID = {
    "author": L_("This shot was removed by its author."),
    "moderator": L_("This shot was removed by a moderator."),
    "system": L_("This shot was removed."),
}


def removed_embed(seq: int, *, by: Literal["author", "moderator", "system"], reason: str | Lazy | None = None) -> discord.Embed:
    """What a removed shot's post shows instead of its clip and embed ("system": a member's data
    deleted at their request, db.privacy; no reason shown), in the current locale (the server's:
    build it inside bot.parts.locale.public)."""
    e = discord.Embed(title=_("Turn #%(seq)s · removed", seq=seq), description=str(_SAID[by]), colour=WAITING)
    if reason and by == "moderator":
        e.add_field(name=_("Reason"), value=esc(str(reason)), inline=False)
    e.set_footer(text=str(NOT_REWOUND))
    return fit_embed(e)


class TakenDown(Protocol):
    """What a removal notice reads of its turn (service.posting's Post and TakenDown fit)."""

    @property
    def seq(self) -> int: ...

    @property
    def author_id(self) -> int: ...

    @property
    def removed_by_id(self) -> int | None: ...

    @property
    def removed_reason(self) -> str | None: ...

    @property
    def removed_note(self) -> str | None: ...


def removed_fields(turn: TakenDown) -> dict:
    """The message edit that shows a removed turn: no file, no button, the notice."""
    by = "system" if turn.removed_by_id is None else "author" if turn.removed_by_id == turn.author_id else "moderator"
    embed = removed_embed(turn.seq, by=by, reason=removal_reason(turn.removed_reason, turn.removed_note))
    return {"content": None, "embed": embed, "attachments": [], "view": None}


async def show(edits: EditScheduler, channel_id: int, message_id: int, fields: dict) -> None:
    """Edit a post into its removal notice, through the channel's edit scheduler."""
    try:
        await edits.final(channel_id, message_id, **fields)
    except discord.HTTPException as e:  # the post was deleted or hidden: the shot is down all the same
        log.info("could not replace removed shot's message %s: %s", message_id, e)


async def reshow_if_removed(deps: Deps, edits: EditScheduler, turn_id: int, channel_id: int, message_id: int) -> None:
    """After a post: if the turn was taken down while the post was being made, show the notice
    (in the locale current: the caller's bot.parts.locale.public)."""
    turn = await posting.taken_down(deps, turn_id)
    if turn is not None:
        await show(edits, channel_id, message_id, removed_fields(turn))


class Remover(Speaker, Protocol):
    """What taking a shot down reads of the client (bot.client's AnimeGamerBot)."""

    @property
    def board(self) -> StatusBoard: ...

    @property
    def edits(self) -> EditScheduler: ...


async def remove(bot: Remover, deps: Deps, interaction: discord.Interaction, turn_id: int, reason: str,
                 *, via: str, moderator: bool) -> shots.Removed:
    """Take the turn down for the member of `interaction` (a moderator, or the turn's author:
    `moderator` is bot.answers.checks.is_moderator's answer); then edit its post in the background.
    Refusals (GameError) are the service's."""
    done = await shots.remove(deps, place(interaction), member(interaction), turn_id, reason,
                              moderator=moderator, via=via)
    notice = await posting.taken_down(deps, turn_id) if done.message_id is not None else None
    if notice is not None and done.message_id is not None:
        async with locale.public(bot, done.guild_id, done.channel_id):  # the post is public
            fields = removed_fields(notice)
        bot.board.spawn(show(bot.edits, done.channel_id, done.message_id, fields), f"remove-shot-{turn_id}")
    return done


def answer(done: shots.Removed) -> str:
    """The member's answer, in their language."""
    return _("Turn #%(seq)s is removed: its clip and text are gone from the channel, /history, /export and the next "
             "turns. The characters keep the states this shot gave them; later turns go on from there.", seq=done.seq)
