"""Gateway shards across bot processes.

Discord splits a bot's guilds into `shard_count` shards: guild g is on shard `(g >> 22) %
shard_count`, and a gateway session identified as shard i gets only the events and interactions of
shard i's guilds. A large bot runs its shards in several processes (`animegamer bot --shards 0-3
--shard-count 8`, or ANIMEGAMER_SHARD_IDS / ANIMEGAMER_SHARD_COUNT); each process must then do on
its own (posting finished turns, vote rounds, idle pauses, pruning, the notifier's sweep) only what
belongs to its shards' guilds. `ShardClaim` says which those are (`owns`; the database applies the
same claim in SQL: db.claims). Unsharded (no ids: every shard in this process) it claims every guild.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from contracts.ids import SHARD_SHIFT
from settings import check_shards, parse_shard_ids

__all__ = ["SHARD_SHIFT", "ShardClaim", "format_shard_ids", "parse_shard_ids", "shard_of"]


def shard_of(guild_id: int, count: int) -> int:
    """The shard that gets guild_id's events when the bot runs `count` shards (Discord's formula,
    as discord.py's Guild.shard_id computes it)."""
    return (guild_id >> SHARD_SHIFT) % count


def format_shard_ids(ids: Iterable[int]) -> str:
    """Shard ids as ranges: [0, 1, 2, 3, 8] -> "0-3,8" (parse_shard_ids reads it back)."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(ids)):
        if run and i != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(i)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


@dataclass(frozen=True)
class ShardClaim:
    """The guilds a bot process claims: those on its shards `ids` of `count`.

    ids None (or every shard of count): the process runs every shard and claims every guild;
    count None too: unsharded, every guild. Guild-less things (DMs) belong to shard 0, as on Discord.
    """

    ids: tuple[int, ...] | None = None
    count: int | None = None

    def __post_init__(self) -> None:
        ids = None if self.ids is None else tuple(sorted(set(self.ids)))
        check_shards(None if ids is None else list(ids), self.count)
        object.__setattr__(self, "ids", ids)

    @classmethod
    def of(cls, ids: Iterable[int] | None, count: int | None) -> ShardClaim:
        return cls(None if ids is None else tuple(ids), count)

    @property
    def everything(self) -> bool:
        """True when this process claims every guild (unsharded, or every shard here)."""
        return self.ids is None or self.count is None or len(self.ids) == self.count

    def owns(self, guild_id: int | None) -> bool:
        """Whether this process claims the guild (None: no guild, a DM: shard 0's)."""
        if self.everything:
            return True
        assert self.ids is not None and self.count is not None
        return (0 if guild_id is None else shard_of(guild_id, self.count)) in self.ids

    def __str__(self) -> str:
        if self.count is None:
            return "every shard"
        if self.everything:
            return f"every shard of {self.count}"
        assert self.ids is not None
        return f"shards {format_shard_ids(self.ids)} of {self.count}"
