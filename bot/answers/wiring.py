"""What answers the interactions, wired onto the client as it starts: loaded by name with the
cogs (bot.client.EXTENSIONS), so that bot.client imports none of it. The command tree's errors
go to bot.answers.replies.report; the persistent buttons (bot.answers.views) answer their clicks after any
restart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.answers import replies
from bot.answers.views import CancelButton, RegenerateButton

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


async def setup(bot: AnimeGamerBot) -> None:
    bot.tree.error(replies.report)
    bot.add_dynamic_items(CancelButton, RegenerateButton)
