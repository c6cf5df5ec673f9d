"""What the game keeps about a member, as /privacy show tells them: counts in one server and in
all servers (db.privacy counts them; the bot's /privacy shows them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Counts:
    games: int = 0  # games joined
    turns: int = 0
    clips: int = 0  # turns whose clip is still stored
    votes: int = 0  # ballots cast and actions proposed
    audit: int = 0  # audit entries as actor or target
    notices: int = 0  # one-time notices shown to them (member_notices; in no server: counted everywhere only)

    @property
    def empty(self) -> bool:
        return not (self.games or self.turns or self.clips or self.votes or self.audit or self.notices)


@dataclass(frozen=True)
class Stored:
    here: Counts
    everywhere: Counts
    servers: int  # servers with any of it
    pending: bool  # a deletion is under way
