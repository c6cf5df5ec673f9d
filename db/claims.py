"""Which servers' rows a query may touch: a bot process running some of the gateway shards claims
only their servers (bot.shards.ShardClaim). The db layer takes any object with the claim's shape,
so it needs nothing from the bot package.

`claim=None` everywhere means every server (the play page, the worker, an unsharded bot)."""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy import ColumnElement, Select, select, true
from sqlalchemy.orm import QueryableAttribute

from db.models import GameSession


class GuildClaim(Protocol):
    """The servers a process claims (bot.shards.ShardClaim)."""

    @property
    def everything(self) -> bool:
        """Every server: no filter needed."""
        ...

    def sql_filter(self, column: ColumnElement[Any] | QueryableAttribute[Any]) -> ColumnElement[bool]:
        """A WHERE clause keeping the rows whose server id `column` is claimed."""
        ...


def claimed(column: ColumnElement[Any] | QueryableAttribute[Any], claim: GuildClaim | None) -> ColumnElement[bool]:
    """`claim`'s filter on the server id `column`; true() for every server."""
    if claim is None or claim.everything:
        return true()
    return claim.sql_filter(column)


def narrows(claim: GuildClaim | None) -> bool:
    """Whether `claim` leaves some servers out (a filter is worth adding to a query)."""
    return claim is not None and not claim.everything


def claimed_sessions(claim: GuildClaim) -> Select[int]:
    """The ids of the game sessions of the claimed servers (a subquery)."""
    return select(GameSession.id).where(claimed(GameSession.guild_id, claim))
