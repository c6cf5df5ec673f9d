"""A turn's post as the message commands on it find it ("Remove shot", "Report shot"): the turn
behind a Discord message, a member's report of it, and taking it down (also `/mod remove`). A
report is audited, and its audit entry is what reaches the moderation log channel: a server
without one cannot be sent reports. A removal is audited too, in its own transaction."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from db import modlog, removal, sessions, turn_reads
from db.models import Turn
from game.shot_errors import NoLogChannel, NotAShot, NotShotAuthor, ShotAlreadyRemoved, ShotNotFinished
from service.deps import Deps, Member, Place
from service.names import shown_name


@dataclass(frozen=True)
class PostedTurn:
    """The turn behind a message, as a report names it."""

    id: int
    session_id: int
    seq: int
    author_id: int
    author_name: str

    @classmethod
    def of(cls, t: Turn) -> PostedTurn:
        return cls(t.id, t.session_id, t.seq, t.author_id, t.author_name)


async def _by_message(s: AsyncSession, guild_id: int, message_id: int) -> Turn:
    turn = await turn_reads.turn_by_message(s, guild_id, message_id)
    if turn is None:
        raise NotAShot()
    return turn


async def shot_by_message(deps: Deps, guild_id: int, message_id: int) -> PostedTurn:
    """The turn whose post (or status message) is message `message_id` of server `guild_id`
    (NotAShot if none)."""
    async with deps.sessions() as s:
        return PostedTurn.of(await _by_message(s, guild_id, message_id))


async def reportable(deps: Deps, guild_id: int, message_id: int) -> PostedTurn:
    """The turn behind the message, if it can be reported: not taken down (ShotAlreadyRemoved),
    and the server has a moderation log channel to send it to (NoLogChannel)."""
    async with deps.sessions() as s:
        turn = await _by_message(s, guild_id, message_id)
        if turn.removed_at is not None:
            raise ShotAlreadyRemoved(turn.seq)
        if await modlog.log_channel(s, guild_id) is None:
            raise NoLogChannel()
        return PostedTurn.of(turn)


async def report(deps: Deps, place: Place, who: Member, turn: PostedTurn, message_id: int) -> None:
    """`who` reports `turn` (seen as message `message_id` in `place`): audited as report_shot."""
    async with deps.sessions.begin() as s:
        gs = await sessions.session_by_id(s, turn.session_id)
        await deps.record(s, place, who, "report_shot", str(turn.seq),
                          turn_id=turn.id, author_id=str(turn.author_id), author=turn.author_name,
                          game_channel_id=str(gs.channel_id), message_id=str(message_id))


@dataclass(frozen=True)
class Removed:
    """A shot taken down: what its face needs to edit the post and answer."""

    seq: int
    guild_id: int
    channel_id: int  # the game's channel (where the post is)
    message_id: int | None  # the post, or the status message of a turn not posted yet
    by_author: bool


async def remove(deps: Deps, place: Place, who: Member, turn_id: int, reason: str, *, moderator: bool,
                 via: str) -> Removed:
    """`who` (a moderator, or the turn's author) takes turn `turn_id` down, its `reason` kept as the
    remover's words: its content goes (db.removal) and the removal is audited as remove_shot, in one
    transaction. Refused: no such turn (NotAShot), someone else's shot for a non-moderator
    (NotShotAuthor), a shot already down (ShotAlreadyRemoved) or not finished (ShotNotFinished)."""
    async with deps.sessions.begin() as s:
        turn = await turn_reads.get_turn(s, turn_id, lock=True)
        if turn is None:
            raise NotAShot()
        if not moderator and turn.author_id != who.id:
            raise NotShotAuthor(shown_name(turn.author_name))
        if turn.removed_at is not None:
            raise ShotAlreadyRemoved(turn.seq)
        if turn.status not in ("done", "failed"):
            raise ShotNotFinished(turn.seq, turn.status)
        by_author = turn.author_id == who.id
        gs = await turn_reads.session_of(s, turn)
        await removal.take_down_turns(s, [turn.id], note=reason, by_id=who.id, by_name=who.name)
        message_id = turn.posted_message_id or turn.status_message_id
        await deps.record(s, place, who, "remove_shot", str(turn.seq),
                          turn_id=turn.id, reason=reason, by="author" if by_author else "moderator", via=via,
                          author_id=str(turn.author_id), author=turn.author_name, game_channel_id=str(gs.channel_id),
                          message_id=None if message_id is None else str(message_id))
    return Removed(turn.seq, gs.guild_id, gs.channel_id, message_id, by_author)
