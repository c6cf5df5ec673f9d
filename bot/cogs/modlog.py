"""The moderation log's lifetime (bot.modlog): it listens while the bot runs. /admin log-channel
chooses the channel (bot.cogs.admin)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from discord.ext import commands

from bot.modlog import ModLog

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


class ModLogCog(commands.Cog, name="ModLog"):
    def __init__(self, bot: AnimeGamerBot) -> None:
        self.bot = bot
        self.log = ModLog(bot)

    async def cog_load(self) -> None:
        self.log.start()

    async def cog_unload(self) -> None:
        await self.log.close()


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(ModLogCog(bot))
