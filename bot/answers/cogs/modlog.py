"""The moderation log's lifetime (bot.answers.modlog): it listens while the bot runs. /admin log-channel
chooses the channel (bot.answers.cogs.admin)."""

from __future__ import annotations

from discord.ext import commands

from bot.answers.modlog import ModLog
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
