"""What the bot's parts read of the client that carries them, as narrow Protocols: the status
board, the notifier, the maintenance jobs and the server-language lookup take the bot typed by
what they use, never bot.client (which makes them): the parts import nothing above them.

`DiscordClient` is the slice of discord.py's client they call; each part adds its own Protocol
of the bot's attributes it reads, all read-only (properties), so the bot's own types fit them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import discord
from discord.abc import GuildChannel, PrivateChannel

from service.jobs import Jobs
from service.runtime import Store
from settings import Settings


class DiscordClient(Protocol):
    """discord.py's client, as far as the parts use it."""

    @property
    def guilds(self) -> Sequence[discord.Guild]: ...

    @property
    def user(self) -> discord.ClientUser | None: ...

    def get_guild(self, id: int, /) -> discord.Guild | None: ...

    def get_channel(self, id: int, /) -> GuildChannel | discord.Thread | PrivateChannel | None: ...

    async def fetch_channel(self, channel_id: int, /) -> GuildChannel | PrivateChannel | discord.Thread: ...

    def is_ready(self) -> bool: ...

    async def wait_until_ready(self) -> None: ...


class Stored(Protocol):
    """What the game service runs on in the bot (bot.parts.service_args.deps_of): its settings, its database
    and its turn queue."""

    @property
    def settings(self) -> Settings: ...

    @property
    def db(self) -> Store: ...

    @property
    def queue(self) -> Jobs: ...


class Wakes(Protocol):
    """The notifier, as the parts that hand it work see it."""

    def wake(self) -> None: ...


class ShowsRounds(Protocol):
    """The vote part (bot.answers.cogs.vote): it shows a vote round's message as the round is stored now."""

    async def refresh(self, round_id: int) -> None: ...


class VoteRounds:
    """Where the parts that change what a round's message shows (a member's deletion request:
    bot.parts.privacy) find the vote part: it registers while it is loaded (cog_load to cog_unload)."""

    def __init__(self) -> None:
        self._shows: ShowsRounds | None = None

    def register(self, shows: ShowsRounds) -> None:
        self._shows = shows

    def unregister(self, shows: ShowsRounds) -> None:
        if self._shows is shows:
            self._shows = None

    @property
    def loaded(self) -> bool:
        return self._shows is not None

    async def refresh(self, round_id: int) -> None:
        """Show the round's message anew; nothing while no vote part is loaded."""
        if self._shows is not None:
            await self._shows.refresh(round_id)
