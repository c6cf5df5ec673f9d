"""Where the parts find the vote part (bot.answers.cogs.vote, loaded with the cogs) without
importing it: `VoteRounds`, which the client makes and hands to the parts that change what a
vote round's message shows, and where the vote part registers while it is loaded."""

from __future__ import annotations

from typing import Protocol


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
