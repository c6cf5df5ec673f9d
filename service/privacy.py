"""What the bot stores about a member, and their request to delete it (db.privacy). The deletion
itself, and that of a server's data some days after the bot leaves it, are scheduled jobs
(service.maintenance); here are what the bot reads to edit the member's posts first."""

from __future__ import annotations

from db import privacy as member_data
from game.member_data import Stored
from service.deps import Deps


async def stored(deps: Deps, user_id: int, guild_id: int) -> Stored:
    """What is stored about member `user_id`: in server `guild_id`, in all servers, and whether a
    deletion is under way."""
    async with deps.sessions() as s:
        return await member_data.stored(s, user_id, guild_id)


async def request_deletion(deps: Deps, user_id: int) -> bool:
    """Ask for member `user_id`'s data to be deleted everywhere; False: already asked, not done yet."""
    async with deps.sessions.begin() as s:
        _request, new = await member_data.request_deletion(s, user_id)
    return new


async def posts_to_clear(deps: Deps, request_id: int) -> list[member_data.Post]:
    """The Discord posts of the shots of deletion request `request_id`'s member, which the bot edits
    into a notice before the request's last step."""
    async with deps.sessions() as s:
        return await member_data.posts_to_clear(s, request_id)


async def rounds_to_refresh(deps: Deps, request_id: int) -> list[int]:
    """The vote rounds the request's member proposed or voted in, whose messages the bot shows again."""
    async with deps.sessions() as s:
        return await member_data.rounds_to_refresh(s, request_id)
