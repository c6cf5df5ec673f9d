"""Taking a shot down from Discord: `/mod remove turn:N reason:...` and the "Remove shot" message
command (bot.cogs.shots) both come here.

A moderator may remove any shot of the server; the turn's author may remove their own. The turn's
content goes through db.removal.take_down_turns and the action is audited in the same
transaction (so it reaches the moderation log, bot.modlog). Then the post is edited in place:
the video, the embed and the button are replaced by a short notice (the message stays, so the
channel's order is kept), through the channel's edit scheduler like every edit of a post.
The notice is public: it is rendered in the server's language (bot.locale.public); the answer to
the member who removed the shot, in theirs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import discord

from bot import audit as bot_audit
from bot import checks, locale, removed
from bot.embeds import person
from db import removal, turn_reads
from db import sessions as game_sessions
from game.shot_errors import NotAShot, NotShotAuthor, ShotAlreadyRemoved, ShotNotFinished
from i18n import _

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Removed:
    seq: int
    channel_id: int  # the game's channel (where the post is)
    message_id: int | None  # the post, or the status message of a turn not posted yet
    by_author: bool


async def remove(bot: AnimeGamerBot, interaction: discord.Interaction[AnimeGamerBot], turn_id: int, reason: str, *, via: str) -> Removed:
    """Take the turn down for the member of `interaction` (a moderator, or the turn's author), in
    one transaction with its audit entry; then edit its post in the background. Refuses (GameError)
    a turn not finished, already removed, or someone else's for a non-moderator."""
    user = interaction.user
    moderator = await checks.is_moderator(interaction)
    async with bot.db.sessions.begin() as s:
        turn = await turn_reads.get_turn(s, turn_id, lock=True)
        if turn is None:
            raise NotAShot()
        if not moderator and turn.author_id != user.id:
            raise NotShotAuthor(person(turn.author_name))
        if turn.removed_at is not None:
            raise ShotAlreadyRemoved(turn.seq)
        if turn.status not in ("done", "failed"):
            raise ShotNotFinished(turn.seq, turn.status)
        by_author = turn.author_id == user.id
        gs = await game_sessions.session_by_id(s, turn.session_id)
        await removal.take_down_turns(s, [turn.id], note=reason, by_id=user.id, by_name=user.display_name)
        message_id = turn.posted_message_id or turn.status_message_id
        await bot_audit.record(
            s, interaction, "remove_shot", str(turn.seq),
            turn_id=turn.id, reason=reason, by="author" if by_author else "moderator", via=via,
            author_id=str(turn.author_id), author=turn.author_name,
            game_channel_id=str(gs.channel_id), message_id=None if message_id is None else str(message_id),
        )
        await s.refresh(turn)
    if message_id is not None:
        async with locale.public(bot, gs.guild_id, gs.channel_id):  # the post is public
            fields = removed.removed_fields(turn)
        bot.board.spawn(removed.show(bot.edits, gs.channel_id, message_id, fields), f"remove-shot-{turn_id}")
    return Removed(turn.seq, gs.channel_id, message_id, by_author)


def answer(done: Removed) -> str:
    """The member's answer, in their language."""
    return _("Turn #%(seq)s is removed: its clip and text are gone from the channel, /history, /export and the next "
             "turns. The characters keep the states this shot gave them; later turns go on from there.", seq=done.seq)
