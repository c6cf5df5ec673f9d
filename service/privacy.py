"""What the bot stores about a member, and their request to delete it (db.privacy: the deletion
itself is a scheduled job's, step by step); and a server's data, deleted some days after the
bot leaves it unless the bot is added back (db.departures)."""

from __future__ import annotations

from db import departures
from db import privacy as member_data
from db.models import GuildDeparture
from service.game import Game


async def stored(game: Game, user_id: int, guild_id: int) -> member_data.Stored:
    """What is stored about member `user_id`: in server `guild_id`, in all servers, and whether a
    deletion is under way."""
    async with game.sessions() as s:
        return await member_data.stored(s, user_id, guild_id)


async def request_deletion(game: Game, user_id: int) -> bool:
    """Ask for member `user_id`'s data to be deleted everywhere; False: already asked, not done yet."""
    async with game.sessions.begin() as s:
        _request, new = await member_data.request_deletion(s, user_id)
    return new


async def left_server(game: Game, guild_id: int) -> GuildDeparture:
    """The bot was removed from server `guild_id`: its data is deleted after the configured days
    (settings.guild_data_days) unless the bot is added back."""
    async with game.sessions.begin() as s:
        return await departures.record_departure(s, guild_id, game.settings.guild_data_days)


async def back_in_server(game: Game, guild_id: int) -> bool:
    """The bot was added to server `guild_id`: a pending deletion of its data is cancelled (True)."""
    async with game.sessions.begin() as s:
        return bool(await departures.cancel_departures(s, [guild_id]))
