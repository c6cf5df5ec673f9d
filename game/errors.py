"""Refusals a player or moderator sees. Each message says what to do next.

The bot shows them as ephemeral replies and the play page as error toasts, so the wording lives
here, once.
"""

from __future__ import annotations

import math
import secrets

from i18n import Lazy


def size_text(n: int) -> str:
    """A byte count as people read upload limits: 8.0 MB, 750 KB."""
    return f"{n / (1024 * 1024):.1f} MB" if n >= 1024 * 1024 else f"{max(1, round(n / 1024))} KB"


class GameError(Exception):
    """A refusal with a message meant for the person who asked."""

    code = "refused"

    def __init__(self, message: str | Lazy):
        super().__init__(message)
        self._message = message

    @property
    def message(self) -> str:
        """The refusal in the locale current where it is shown (a member's answer, a page's toast)."""
        return str(self._message)

    def __str__(self) -> str:
        return self.message


class NoSession(GameError):
    code = "no_session"

    def __init__(self) -> None:
        super().__init__("No game is running in this channel. Start one with /game start.")


class SessionExists(GameError):
    code = "session_exists"

    def __init__(self) -> None:
        super().__init__("A game is already running in this channel. Join it with /game join.")


class SessionPaused(GameError):
    code = "paused"

    def __init__(self, reason: str | None = None) -> None:
        why = f" ({reason})" if reason else ""
        super().__init__(f"This game is paused{why}. A moderator can resume it with /mod resume.")


class NoFilm(GameError):
    code = "no_film"

    def __init__(self) -> None:
        super().__init__("No film is configured here. An admin can choose one with /admin film.")


class UnknownFilm(GameError):
    code = "unknown_film"

    def __init__(self, film_id: str, known: list[str]) -> None:
        super().__init__(f"Unknown film {film_id!r}. Choose one of: {', '.join(known)}.")


class FilmWithdrawn(GameError):
    """The session's film is no longer in the film catalogue (an operator removed or disabled it)."""

    code = "film_withdrawn"

    def __init__(self, film_id: str) -> None:
        self.film_id = film_id
        super().__init__(
            f"This game's film {film_id!r} is no longer offered here (it was removed from the film catalogue), "
            "so the game is paused until an operator brings it back. An admin can start a new game with another film."
        )


class UnknownCharacter(GameError):
    code = "unknown_character"

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"{name!r} is not a playable character here. Choose one of: {', '.join(known) or 'none'}.")


class CharacterTaken(GameError):
    code = "character_taken"

    def __init__(self, character: str, by: str) -> None:
        super().__init__(f"{character} is already played by {by}. Pick another character.")


class AlreadyJoined(GameError):
    code = "already_joined"

    def __init__(self, character: str) -> None:
        super().__init__(f"You already play {character}. Use /game leave first to switch.")


class NotJoined(GameError):
    code = "not_joined"

    def __init__(self) -> None:
        super().__init__("You have not joined this game. Pick a character with /game join.")


class BacklogFull(GameError):
    code = "backlog_full"

    def __init__(self, cap: int) -> None:
        super().__init__(f"This game already has {cap} turns waiting. Try again when one has finished.")


class Cooldown(GameError):
    code = "cooldown"

    def __init__(self, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        super().__init__(f"Slow down: you can act again in {math.ceil(seconds_left)} s.")


class TurnNotFound(GameError):
    code = "turn_not_found"

    def __init__(self, turn: int | str) -> None:
        super().__init__(f"Turn {turn} was not found in this game.")


class TurnNotCancellable(GameError):
    code = "not_cancellable"

    def __init__(self, status: str) -> None:
        super().__init__(f"That turn is {status}; only queued turns can be cancelled.")


class TurnNotFinished(GameError):
    code = "not_finished"

    def __init__(self, status: str) -> None:
        super().__init__(f"The latest turn is still {status}; wait for it to finish before regenerating it.")


class NotAllowed(GameError):
    code = "not_allowed"

    def __init__(self, what: str) -> None:
        super().__init__(f"You are not allowed to {what}.")


class ServiceDown(GameError):
    code = "service_down"

    def __init__(self, what: str = "the game database") -> None:
        super().__init__(f"Sorry, {what} is not reachable right now. Nothing was changed; please try again shortly.")


class GuildOnly(GameError):
    code = "guild_only"

    def __init__(self) -> None:
        super().__init__("Games run in server channels. Use this command in a channel of a server.")


class FilmFixed(GameError):
    code = "film_fixed"

    def __init__(self, title: str) -> None:
        super().__init__(f"This channel plays {title}. Leave out the film option, or ask an admin to change it with /admin film.")


class MissingRights(GameError):
    """A member without the rights an admin or moderator command needs."""

    code = "missing_rights"

    NEEDS = {
        "admin": "the Manage Server permission or the bot's admin role",
        "moderator": "the Manage Messages permission or the bot's moderator role",
    }

    def __init__(self, kind: str) -> None:
        super().__init__(f"You need {self.NEEDS[kind]} for this. Ask a server admin if you should have it.")


class NotTurnAuthor(GameError):
    code = "not_author"

    def __init__(self, author: str, what: str) -> None:
        super().__init__(f"Only {author} (who asked for this turn) or a moderator can {what} it.")


class NoTurnToRegenerate(GameError):
    code = "no_turn_to_regenerate"

    def __init__(self) -> None:
        super().__init__("This game has no finished turn to regenerate.")


class NotLatestTurn(GameError):
    code = "not_latest"

    def __init__(self, seq: int, latest: int) -> None:
        super().__init__(f"Only the game's latest turn (#{latest}) can be regenerated; this is turn #{seq}.")


class TextRefused(GameError):
    """Player text the sanitiser refused (game.sanitize.InputRefused), worded for the player."""

    code = "text_refused"

    def __init__(self, field_name: str, reason: str) -> None:
        label = {"characters": "list of characters", "instruction": "instruction"}.get(field_name, field_name.replace("_", " "))
        super().__init__(f"Your {label} was refused: {reason}. Please change it and try again.")


class NothingToExport(GameError):
    code = "nothing_to_export"

    def __init__(self) -> None:
        super().__init__("This game has no finished shots with a clip yet. Play a turn with /act first.")


class ExportTooLarge(GameError):
    code = "export_too_large"

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(
            f"The stitched video does not fit this server's upload limit ({size_text(limit_bytes)}), even at "
            "reduced quality. Export a shorter game, or ask the server to raise its upload limit."
        )


class ExportBusy(GameError):
    code = "export_busy"

    def __init__(self) -> None:
        super().__init__("Your previous /export is still being stitched. Wait for it to arrive, then try again.")


class ExportCooldown(GameError):
    code = "export_cooldown"

    def __init__(self, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        super().__init__(f"You exported a video a moment ago; you can export again in {math.ceil(seconds_left)} s.")


class PlayerNotInGame(GameError):
    code = "player_not_in_game"

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is not playing in this channel's game. /status shows who plays whom.")


class GameEnded(GameError):
    code = "game_ended"

    def __init__(self) -> None:
        super().__init__("That turn belongs to a game that has ended (reset or archived). Play on with /act.")


def new_reference() -> str:
    """A short id that ties what a person is shown to the logged traceback (8 hex digits)."""
    return secrets.token_hex(4)


class InternalError(GameError):
    """A bug on our side, logged with its traceback under `reference`; the member is told to retry
    or to give an admin the reference, which finds the traceback in the log."""

    code = "internal"

    def __init__(self, reference: str) -> None:
        self.reference = reference
        super().__init__(
            f"Something went wrong on our side (reference {reference}). Please try again; if it keeps "
            "failing, tell a server admin and give them the reference."
        )


class OutOfRange(GameError):
    """A number that no row can hold (an id beyond 64 bits, a turn number beyond 32): refused
    before it reaches the database, which would fail on it."""

    code = "out_of_range"

    def __init__(self, what: str) -> None:
        super().__init__(f"That {what} is not valid.")

class UnknownGame(GameError):
    code = "unknown_game"

    def __init__(self, number: int, count: int) -> None:
        known = f"games 1 to {count}" if count else "no games yet"
        super().__init__(f"This channel has no game {number} ({known}). /games lists them.")


# --- vote mode


class VoteModeOn(GameError):
    code = "vote_mode"

    def __init__(self) -> None:
        super().__init__("This channel plays by vote: propose an action with /vote propose and vote on the round's message.")


class VoteModeOff(GameError):
    code = "vote_mode_off"

    def __init__(self) -> None:
        super().__init__("This channel does not play by vote; act with /act. An admin can turn voting on with /vote mode.")


class NoOpenRound(GameError):
    code = "no_round"

    def __init__(self) -> None:
        super().__init__("That vote round is over. Propose an action with /vote propose to open the next one.")


class AlreadyProposed(GameError):
    code = "already_proposed"

    def __init__(self, number: int) -> None:
        super().__init__(f"You already proposed option {number} in this round. Vote, or wait for the next round.")


class RoundFull(GameError):
    code = "round_full"

    def __init__(self, cap: int) -> None:
        super().__init__(f"This round already has {cap} proposals. Vote for one of them, or wait for the next round.")


class UnknownProposal(GameError):
    code = "unknown_proposal"

    def __init__(self) -> None:
        super().__init__("That proposal is not part of the open round. Vote on the current round's message.")


# --- content rules (game.content_rules)


class ContentRefused(GameError):
    """Text a content rule set refused: `rule_set` names it ("the operator's rules", "this
    server's filter", "this server's AutoMod rule <name>"); `what` is the text's role."""

    code = "content_refused"

    def __init__(self, what: str, rule_set: str, term: str, text: str) -> None:
        self.what, self.rule_set, self.term, self.text = what, rule_set, term, text
        super().__init__(f"Your {what} was refused by {rule_set}. Please rephrase it and try again.")


class FilterTermRefused(GameError):
    code = "filter_term_refused"

    def __init__(self, term: str, reason: str) -> None:
        super().__init__(f"The term {term!r} {reason}.")


class FilterFull(GameError):
    code = "filter_full"

    def __init__(self, cap: int) -> None:
        super().__init__(f"This server's filter already holds {cap} terms, the most it can. Remove one with /admin filter remove first.")


class FilterTermExists(GameError):
    code = "filter_term_exists"

    def __init__(self, term: str) -> None:
        super().__init__(f"{term!r} is already in this server's filter. /admin filter list shows it.")


class FilterTermUnknown(GameError):
    code = "filter_term_unknown"

    def __init__(self, term: str) -> None:
        super().__init__(f"{term!r} is not in this server's filter. /admin filter list shows the terms.")
