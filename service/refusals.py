"""The checks several actions share, each raising its refusal (game.errors.GameError): a live
game in the channel, not paused, open to direct turns (not in vote mode), with the member playing
in it. Each runs in the action's transaction, after the action took the lock it needs (the
game's row: service.turn_queue), so nothing changes between the check and the write."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from db import sessions, votes
from db.models import GameSession, Player
from game.session_errors import NoSession, NotJoined, SessionPaused
from game.turn_errors import VoteModeOn


async def live_session(s: AsyncSession, channel_id: int, *, lock: bool = False) -> GameSession:
    """The channel's game, running or paused (NoSession if none); `lock`: its row, until the
    transaction ends."""
    gs = await sessions.live_session(s, channel_id, lock=lock)
    if gs is None:
        raise NoSession()
    return gs


def require_running(gs: GameSession) -> None:
    """SessionPaused for a paused game, NoSession for one that ended (archived meanwhile)."""
    if gs.status == "paused":
        raise SessionPaused(gs.paused_reason, gs.paused_note)
    if gs.status != "active":
        raise NoSession()


async def running_session(s: AsyncSession, channel_id: int) -> GameSession:
    """The channel's game, if it is not paused (its row is not locked)."""
    gs = await live_session(s, channel_id)
    require_running(gs)
    return gs


async def require_direct_play(s: AsyncSession, channel_id: int) -> None:
    """VoteModeOn where an admin chose vote mode: turns come from vote rounds there."""
    if (await votes.vote_config(s, channel_id)).enabled:
        raise VoteModeOn()


async def player(s: AsyncSession, gs: GameSession, user_id: int) -> Player:
    """The member's player in `gs` (NotJoined if they play no character there)."""
    me = await sessions.player_of(s, gs.id, user_id)
    if me is None:
        raise NotJoined()
    return me


async def direct_player(s: AsyncSession, gs: GameSession, user_id: int) -> Player:
    """Who may play a turn of their own in `gs`: not in vote mode (VoteModeOn: propose instead),
    and joined (NotJoined). The checks every direct turn takes, once."""
    await require_direct_play(s, gs.channel_id)
    return await player(s, gs, user_id)
