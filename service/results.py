"""What actions hand back to the faces of the rows they touched: frozen copies (a game, a player,
a turn by its number), never the rows. Each carries what a face reads of it; the faces' other
values are their service module's (service.listings, service.views, service.status)."""

from __future__ import annotations

from dataclasses import dataclass

from db.models import GameSession, Player, Turn


@dataclass(frozen=True)
class SessionRef:
    """A game an action changed: which one, where it plays, its film, and why it is paused."""

    id: int
    channel_id: int
    film_id: str
    paused_reason: str | None  # a code (game.stored_reasons); None: not paused, or no reason given
    paused_note: str | None  # a moderator's own words

    @classmethod
    def of(cls, gs: GameSession) -> SessionRef:
        return cls(gs.id, gs.channel_id, gs.film_id, gs.paused_reason, gs.paused_note)


@dataclass(frozen=True)
class PlayerView:
    """A member playing a character, by the name they joined with."""

    user_id: int
    user_name: str
    character_id: str

    @classmethod
    def of(cls, p: Player) -> PlayerView:
        return cls(p.user_id, p.user_name, p.character_id)


@dataclass(frozen=True)
class TurnRef:
    """A turn an action queued, cancelled or regenerated: its id and its number in its game."""

    id: int
    seq: int

    @classmethod
    def of(cls, t: Turn) -> TurnRef:
        return cls(t.id, t.seq)
