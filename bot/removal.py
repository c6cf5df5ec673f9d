"""Taking a shot down from Discord: `/mod remove turn:N reason:...` and the "Remove shot" message
command (bot.cogs.shots) both come here.

A moderator may remove any shot of the server; the turn's author may remove their own. The rule and
the transaction (the content taken down, the remove_shot audit entry that reaches the moderation
log, bot.modlog) are the service's (service.shots.remove). Then the post is edited in place: the
video, the embed and the button are replaced by a short notice (the message stays, so the
channel's order is kept), through the channel's edit scheduler like every edit of a post.
The notice is public: it is rendered in the server's language (bot.locale.public); the answer to
the member who removed the shot, in theirs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord

from bot import checks, locale, removed
from bot.game import member, place
from i18n import _
from service import posting, shots
from service.game import Game

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


async def remove(bot: AnimeGamerBot, game: Game, interaction: discord.Interaction[AnimeGamerBot], turn_id: int, reason: str,
                 *, via: str) -> shots.Removed:
    """Take the turn down for the member of `interaction` (a moderator, or the turn's author); then
    edit its post in the background. Refusals (GameError) are the service's."""
    moderator = await checks.is_moderator(interaction)
    done = await shots.remove(game, place(interaction), member(interaction), turn_id, reason,
                              moderator=moderator, via=via)
    notice = await posting.taken_down(game, turn_id) if done.message_id is not None else None
    if notice is not None and done.message_id is not None:
        async with locale.public(bot, done.guild_id, done.channel_id):  # the post is public
            fields = removed.removed_fields(notice)
        bot.board.spawn(removed.show(bot.edits, done.channel_id, done.message_id, fields), f"remove-shot-{turn_id}")
    return done


def answer(done: shots.Removed) -> str:
    """The member's answer, in their language."""
    return _("Turn #%(seq)s is removed: its clip and text are gone from the channel, /history, /export and the next "
             "turns. The characters keep the states this shot gave them; later turns go on from there.", seq=done.seq)
