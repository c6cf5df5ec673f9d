"""What a removed shot's post shows instead of its clip, embed and button, and the edit that shows
it (bot.removal takes shots down; the notifier re-shows the notice on a post made while its turn
was being taken down; db.privacy's deletions show it too). The notice is public: build it in the
server's language (bot.locale.public)."""

from __future__ import annotations

import logging
from typing import Literal, Protocol

import discord

from bot.edits import EditScheduler
from bot.embeds import WAITING, esc, fit_embed
from game.stored_reasons import removal_reason
from i18n import L_, Lazy, _
from service import posting
from service.game import Game

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
    build it inside bot.locale.public)."""
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


async def reshow_if_removed(game: Game, edits: EditScheduler, turn_id: int, channel_id: int, message_id: int) -> None:
    """After a post: if the turn was taken down while the post was being made, show the notice
    (in the locale current: the caller's bot.locale.public)."""
    turn = await posting.taken_down(game, turn_id)
    if turn is not None:
        await show(edits, channel_id, message_id, removed_fields(turn))
