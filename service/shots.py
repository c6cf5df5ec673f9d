"""A turn's post as the message commands on it find it ("Remove shot", "Report shot"): the turn
behind a Discord message, and a member's report of it. A report is audited, and its audit entry
is what reaches the moderation log channel: a server without one cannot be sent reports."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from db import modlog, turn_reads
from db.models import Turn
from game.shot_errors import NoLogChannel, NotAShot, ShotAlreadyRemoved
from service.game import Game, Member, Place


async def _by_message(s: AsyncSession, guild_id: int, message_id: int) -> Turn:
    turn = await turn_reads.turn_by_message(s, guild_id, message_id)
    if turn is None:
        raise NotAShot()
    return turn


async def shot_by_message(game: Game, guild_id: int, message_id: int) -> Turn:
    """The turn whose post (or status message) is message `message_id` of server `guild_id`
    (NotAShot if none)."""
    async with game.sessions() as s:
        return await _by_message(s, guild_id, message_id)


async def reportable(game: Game, guild_id: int, message_id: int) -> Turn:
    """The turn behind the message, if it can be reported: not taken down (ShotAlreadyRemoved),
    and the server has a moderation log channel to send it to (NoLogChannel)."""
    async with game.sessions() as s:
        turn = await _by_message(s, guild_id, message_id)
        if turn.removed_at is not None:
            raise ShotAlreadyRemoved(turn.seq)
        if await modlog.log_channel(s, guild_id) is None:
            raise NoLogChannel()
    return turn


async def report(game: Game, place: Place, who: Member, turn: Turn, message_id: int) -> None:
    """`who` reports `turn` (seen as message `message_id` in `place`): audited as report_shot."""
    async with game.sessions.begin() as s:
        gs = await turn_reads.session_of(s, turn)
        await game.record(s, place, who, "report_shot", str(turn.seq),
                          turn_id=turn.id, author_id=str(turn.author_id), author=turn.author_name,
                          game_channel_id=str(gs.channel_id), message_id=str(message_id))
