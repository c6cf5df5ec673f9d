"""Refusals about a channel's game and its players: no game, a paused one, joining, characters,
the game's history and its export. GameErrors (game.errors), shown the same way."""

from __future__ import annotations

from game.errors import GameError
from game.stored_reasons import pause_reason
from game.texts import _choices
from i18n import L_, Lazy


class NoSession(GameError):
    code = "no_session"
    hint = "start_game"

    def __init__(self) -> None:
        super().__init__(L_("No game is running in this channel."))


class SessionExists(GameError):
    code = "session_exists"
    hint = "join_game"

    def __init__(self) -> None:
        super().__init__(L_("A game is already running in this channel."))


class SessionPaused(GameError):
    code = "paused"
    hint = "resume"

    def __init__(self, reason: str | None = None, note: str | None = None) -> None:
        """`reason`: the stored code (game.stored_reasons), `note`: a moderator's own words."""
        shown = pause_reason(reason, note)
        if shown is not None:
            # TRANSLATORS: %(reason)s is why the game was paused: a moderator's words, or "idle", "film withdrawn".
            super().__init__(L_("This game is paused (%(reason)s).", reason=shown), reason=reason, note=note)
        else:
            super().__init__(L_("This game is paused."), reason=reason, note=note)


class UnknownCharacter(GameError):
    code = "unknown_character"

    def __init__(self, name: str, known: list[str]) -> None:
        if known:
            # TRANSLATORS: %(name)s is the character as typed, quoted; %(names)s the playable ones ("Kiki or Jiji").
            super().__init__(L_("%(name)s is not a playable character here. Choose %(names)s.",
                                name=repr(name), names=_choices(known)), name=name, names=known)
        else:
            self.hint = "enable_character"
            super().__init__(L_("%(name)s is not a playable character here, and no character is playable in this channel.",
                                name=repr(name)), name=name, names=[])


class CharacterTaken(GameError):
    code = "character_taken"

    def __init__(self, character: str | Lazy, by: str | Lazy) -> None:
        # TRANSLATORS: %(player)s is a member's display name (or "another player").
        super().__init__(L_("%(character)s is already played by %(player)s. Pick another character.",
                            character=character, player=by), character=character, player=by)


class AlreadyJoined(GameError):
    code = "already_joined"
    hint = "leave_first"

    def __init__(self, character: str | Lazy) -> None:
        super().__init__(L_("You already play %(character)s.", character=character), character=character)


class NotJoined(GameError):
    code = "not_joined"
    hint = "pick_character"

    def __init__(self) -> None:
        super().__init__(L_("You have not joined this game."))


class PlayerNotInGame(GameError):
    code = "player_not_in_game"
    hint = "who_plays"

    def __init__(self, name: str) -> None:
        # TRANSLATORS: %(name)s is a member's display name.
        super().__init__(L_("%(name)s is not playing in this channel's game.", name=name), name=name)


class GameEnded(GameError):
    code = "game_ended"
    hint = "play_on"

    def __init__(self) -> None:
        super().__init__(L_("That turn belongs to a game that has ended (reset or archived)."))


class UnknownGame(GameError):
    code = "unknown_game"
    hint = "list_games"

    def __init__(self, number: int, count: int) -> None:
        if count:
            super().__init__(L_("This channel has no game %(number)s (games 1 to %(count)s).",
                                number=number, count=count), number=number, count=count)
        else:
            super().__init__(L_("This channel has no game %(number)s (no games yet).", number=number), number=number, count=0)
