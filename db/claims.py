"""Which servers' rows a query may touch: a bot process running some of the gateway shards claims
only their servers (bot.parts.shards.ShardClaim). The db layer takes any object with the claim's shape
(its shard ids and count), so it needs nothing from the bot package, and writes the SQL itself.

`claim=None` everywhere means every server (the play page, the worker, an unsharded bot)."""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy import BigInteger, ColumnElement, Integer, Select, literal, select, true
from sqlalchemy.orm import QueryableAttribute

from contracts.ids import SHARD_SHIFT
from db.models import GameSession


class GuildClaim(Protocol):
    """The servers a process claims (bot.parts.shards.ShardClaim)."""

    @property
    def everything(self) -> bool:
        """Every server: no filter needed."""
        ...

    @property
    def ids(self) -> tuple[int, ...] | None:
        """The shards claimed (None: every one)."""
        ...

    @property
    def count(self) -> int | None:
        """Of how many shards (None: unsharded)."""
        ...


def shard_expr(column: ColumnElement[Any] | QueryableAttribute[Any], count: int) -> ColumnElement[int]:
    """The shard of the server id `column` (a BIGINT): `(column >> 22) % count`, computed exactly by
    Postgres on the bigint (bigint >> integer: Postgres has no bigint >> bigint; then bigint %
    bigint: no float)."""
    return column.op(">>", return_type=BigInteger)(literal(SHARD_SHIFT, Integer)) % count


def claimed(column: ColumnElement[Any] | QueryableAttribute[Any], claim: GuildClaim | None) -> ColumnElement[bool]:
    """A WHERE clause keeping the rows whose server id `column` is on `claim`'s shards; true() for
    every server. A NULL server id is not claimed by a sharded process."""
    if claim is None or claim.everything:
        return true()
    assert claim.ids is not None and claim.count is not None
    shard = shard_expr(column, claim.count)
    return shard == claim.ids[0] if len(claim.ids) == 1 else shard.in_(claim.ids)


def narrows(claim: GuildClaim | None) -> bool:
    """Whether `claim` leaves some servers out (a filter is worth adding to a query)."""
    return claim is not None and not claim.everything


def claimed_sessions(claim: GuildClaim) -> Select[int]:
    """The ids of the game sessions of the claimed servers (a subquery)."""
    return select(GameSession.id).where(claimed(GameSession.guild_id, claim))
