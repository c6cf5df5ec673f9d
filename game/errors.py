"""Refusals a player or moderator sees: a code, a message that says what went wrong, and a `hint`
key for what to do next.

The bot shows them as ephemeral replies and the play page as error toasts, so the wording lives
here, once; what to do next is each face's to say (`GameError.shown`): the bot names its commands
(bot.hints), the page its buttons (play.errors), so no message here names either. Every message is a lazy catalog message (i18n.L_): built where the refusal is raised,
rendered in the locale current where it is shown (the member's, the page's). Values that depend on
the locale too (a list, a size, a wait) are placeholders rendered then (`Later`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from game.content_rules import rule_set_label
from game.sanitize import field_label
from game.texts import (  # noqa: F401  (re-exported: the refusals' pieces are imported from here too)
    TURN_STATUS,
    Later,
    _choices,
    catalog_text,
    listed,
    size_text,
    turn_status,
    wait_text,
)
from i18n import L_, Lazy
from i18n.translate import Ln_


class GameError(Exception):
    """A refusal with a message meant for the person who asked."""

    code = "refused"
    hint: str | None = None  # the key of what to do next, which each face words its own way

    def __init__(self, message: str | Lazy):
        super().__init__(message)
        self._message = message

    @property
    def message(self) -> str:
        """The refusal in the locale current where it is shown (a member's answer, a page's toast)."""
        return str(self._message)

    def shown(self, hints: Mapping[str, object]) -> str:
        """The message, then the face's hint for it (rendered in the current locale), if it has one."""
        hint = hints.get(self.hint) if self.hint else None
        return self.message if hint is None else sentences(self.message, str(hint))

    def __str__(self) -> str:
        return self.message


def sentences(first: str, second: str) -> str:
    """Two sentences as one text: a space after a Latin full stop, none after a CJK one."""
    return first + ("" if first.endswith(("。", "）", "！", "？")) else " ") + second


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

    def __init__(self, reason: str | None = None) -> None:
        if reason:
            # TRANSLATORS: %(reason)s is why the game was paused: a moderator's words, or "idle", "film withdrawn".
            super().__init__(L_("This game is paused (%(reason)s).",
                                reason=catalog_text(reason)))
        else:
            super().__init__(L_("This game is paused."))


class NoFilm(GameError):
    code = "no_film"
    hint = "choose_film"

    def __init__(self) -> None:
        super().__init__(L_("No film is configured here."))


class UnknownFilm(GameError):
    code = "unknown_film"

    def __init__(self, film_id: str, known: list[str]) -> None:
        if known:
            # TRANSLATORS: %(film)s is the film id as typed, quoted; %(films)s the films offered ("ponyo or qiqi").
            super().__init__(L_("Unknown film %(film)s. Choose %(films)s.", film=repr(film_id), films=_choices(known)))
        else:
            super().__init__(L_("Unknown film %(film)s. No film is offered here.", film=repr(film_id)))


class FilmWithdrawn(GameError):
    """The session's film is no longer in the film catalogue (an operator removed or disabled it)."""

    code = "film_withdrawn"

    def __init__(self, film_id: str) -> None:
        self.film_id = film_id
        # TRANSLATORS: %(film)s is the film's id, quoted.
        super().__init__(L_(
            "This game's film %(film)s is no longer offered here (it was removed from the film catalogue), "
            "so the game is paused until an operator brings it back. An admin can start a new game with another film.",
            film=repr(film_id),
        ))


class UnknownCharacter(GameError):
    code = "unknown_character"

    def __init__(self, name: str, known: list[str]) -> None:
        if known:
            # TRANSLATORS: %(name)s is the character as typed, quoted; %(names)s the playable ones ("Kiki or Jiji").
            super().__init__(L_("%(name)s is not a playable character here. Choose %(names)s.",
                                name=repr(name), names=_choices(known)))
        else:
            self.hint = "enable_character"
            super().__init__(L_("%(name)s is not a playable character here, and no character is playable in this channel.",
                                name=repr(name)))


class CharacterTaken(GameError):
    code = "character_taken"

    def __init__(self, character: str | Lazy, by: str | Lazy) -> None:
        # TRANSLATORS: %(player)s is a member's display name (or "another player").
        super().__init__(L_("%(character)s is already played by %(player)s. Pick another character.",
                            character=character, player=by))


class AlreadyJoined(GameError):
    code = "already_joined"
    hint = "leave_first"

    def __init__(self, character: str | Lazy) -> None:
        super().__init__(L_("You already play %(character)s.", character=character))


class NotJoined(GameError):
    code = "not_joined"
    hint = "pick_character"

    def __init__(self) -> None:
        super().__init__(L_("You have not joined this game."))


class BacklogFull(GameError):
    code = "backlog_full"

    def __init__(self, cap: int) -> None:
        super().__init__(Ln_("This game already has %(n)s turn waiting. Try again when it has finished.",
                             "This game already has %(n)s turns waiting. Try again when one has finished.", cap))


class Cooldown(GameError):
    code = "cooldown"

    def __init__(self, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        # TRANSLATORS: %(wait)s is a length of time, e.g. "27 seconds".
        super().__init__(L_("Slow down: you can act again in %(wait)s.", wait=Later(wait_text, seconds_left)))


class TurnNotFound(GameError):
    code = "turn_not_found"

    def __init__(self, turn: int | str) -> None:
        super().__init__(L_("Turn %(turn)s was not found in this game.", turn=turn))


class TurnNotCancellable(GameError):
    code = "not_cancellable"

    def __init__(self, status: str) -> None:
        # TRANSLATORS: %(status)s is a turn's status: running, done, failed or cancelled.
        super().__init__(L_("That turn is %(status)s; only queued turns can be cancelled.", status=turn_status(status)))


class TurnNotFinished(GameError):
    code = "not_finished"

    def __init__(self, status: str) -> None:
        # TRANSLATORS: %(status)s is a turn's status: queued or running.
        super().__init__(L_("The latest turn is still %(status)s; wait for it to finish before regenerating it.",
                            status=turn_status(status)))


class NotAllowed(GameError):
    code = "not_allowed"

    def __init__(self, what: str | Lazy) -> None:
        # TRANSLATORS: %(what)s is an action, e.g. "cancel this turn".
        super().__init__(L_("You are not allowed to %(what)s.", what=catalog_text(what)))


class ServiceDown(GameError):
    code = "service_down"

    MESSAGES = {
        "the game database": L_("Sorry, the game database is not reachable right now. Nothing was changed; "
                                "please try again shortly."),
        "the generation queue": L_("Sorry, the generation queue is not reachable right now. Nothing was changed; "
                                   "please try again shortly."),
    }

    def __init__(self, what: str = "the game database") -> None:
        message = self.MESSAGES.get(what)
        if message is None:
            # TRANSLATORS: %(service)s names a service of the bot, e.g. "the game database".
            message = L_("Sorry, %(service)s is not reachable right now. Nothing was changed; please try again shortly.",
                         service=catalog_text(what))
        super().__init__(message)


class GuildOnly(GameError):
    code = "guild_only"

    def __init__(self) -> None:
        super().__init__(L_("Games run in server channels. Use this command in a channel of a server."))


class FilmFixed(GameError):
    code = "film_fixed"
    hint = "film_option"

    def __init__(self, title: str | Lazy) -> None:
        # TRANSLATORS: %(film)s is a film's title.
        super().__init__(L_("This channel plays %(film)s.", film=title))


class MissingRights(GameError):
    """A member without the rights an admin or moderator command needs."""

    code = "missing_rights"

    MESSAGES = {
        "admin": L_("You need the Manage Server permission or the bot's admin role for this. "
                    "Ask a server admin if you should have it."),
        "moderator": L_("You need the Manage Messages permission or the bot's moderator role for this. "
                        "Ask a server admin if you should have it."),
    }

    def __init__(self, kind: str) -> None:
        super().__init__(self.MESSAGES[kind])


class NotTurnAuthor(GameError):
    code = "not_author"

    def __init__(self, author: str, what: str) -> None:
        if what == "cancel":
            # TRANSLATORS: %(author)s is a member's display name.
            message = L_("Only %(author)s (who asked for this turn) or a moderator can cancel it.", author=author)
        elif what == "regenerate":
            # TRANSLATORS: %(author)s is a member's display name.
            message = L_("Only %(author)s (who asked for this turn) or a moderator can regenerate it.", author=author)
        else:
            # TRANSLATORS: %(author)s is a member's display name; %(action)s a verb such as "cancel".
            message = L_("Only %(author)s (who asked for this turn) or a moderator can %(action)s it.",
                         author=author, action=catalog_text(what))
        super().__init__(message)


class NoTurnToRegenerate(GameError):
    code = "no_turn_to_regenerate"

    def __init__(self) -> None:
        super().__init__(L_("This game has no finished turn to regenerate."))


class NotLatestTurn(GameError):
    code = "not_latest"

    def __init__(self, seq: int, latest: int) -> None:
        super().__init__(L_("Only the game's latest turn (#%(latest)s) can be regenerated; this is turn #%(seq)s.",
                            latest=latest, seq=seq))


class TextRefused(GameError):
    """Player text the sanitiser refused (game.sanitize.InputRefused), worded for the player."""

    code = "text_refused"

    def __init__(self, field_name: str, reason: str | Lazy) -> None:
        # TRANSLATORS: %(field)s names what the player typed ("motion", "list of characters"); %(reason)s is
        # why it was refused, worded to follow it ("is too long (31 characters; at most 30)").
        super().__init__(L_("Your %(field)s was refused: %(reason)s. Please change it and try again.",
                            field=Later(field_label, field_name), reason=reason))


class NothingToExport(GameError):
    code = "nothing_to_export"
    hint = "act_first"

    def __init__(self) -> None:
        super().__init__(L_("This game has no finished shots with a clip yet."))


class ExportTooLarge(GameError):
    code = "export_too_large"

    def __init__(self, limit_bytes: int) -> None:
        # TRANSLATORS: %(limit)s is a size such as "8.0 MB".
        super().__init__(L_(
            "The stitched video does not fit this server's upload limit (%(limit)s), even at reduced quality. "
            "Export a shorter game, or ask the server to raise its upload limit.",
            limit=Later(size_text, limit_bytes),
        ))


class ExportCooldown(GameError):
    code = "export_cooldown"

    def __init__(self, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        # TRANSLATORS: %(wait)s is a length of time, e.g. "60 seconds".
        super().__init__(L_("You exported a video a moment ago; you can export again in %(wait)s.",
                            wait=Later(wait_text, seconds_left)))


class PlayerNotInGame(GameError):
    code = "player_not_in_game"
    hint = "who_plays"

    def __init__(self, name: str) -> None:
        # TRANSLATORS: %(name)s is a member's display name.
        super().__init__(L_("%(name)s is not playing in this channel's game.", name=name))


class GameEnded(GameError):
    code = "game_ended"
    hint = "play_on"

    def __init__(self) -> None:
        super().__init__(L_("That turn belongs to a game that has ended (reset or archived)."))


def new_reference() -> str:
    """A short id that ties what a person is shown to the logged traceback (8 hex digits)."""
    return secrets.token_hex(4)


class InternalError(GameError):
    """A bug on our side, logged with its traceback under `reference`; the member is told to retry
    or to give an admin the reference, which finds the traceback in the log."""

    code = "internal"

    def __init__(self, reference: str) -> None:
        self.reference = reference
        # TRANSLATORS: %(reference)s is a short code (8 hex digits) that finds the error in the bot's log.
        super().__init__(L_(
            "Something went wrong on our side (reference %(reference)s). Please try again; if it keeps "
            "failing, tell a server admin and give them the reference.",
            reference=reference,
        ))


class OutOfRange(GameError):
    """A number that no row can hold (an id beyond 64 bits, a turn number beyond 32): refused
    before it reaches the database, which would fail on it."""

    code = "out_of_range"

    # What the services call the number (db.bounds.require_id's `what`), each a whole sentence.
    MESSAGES = {
        "id": L_("That id is not valid."),
        "server id": L_("That server id is not valid."),
        "channel id": L_("That channel id is not valid."),
        "user id": L_("That user id is not valid."),
        "player id": L_("That player id is not valid."),
        "role id": L_("That role id is not valid."),
    }

    def __init__(self, what: str) -> None:
        message = self.MESSAGES.get(what)
        if message is None:
            # TRANSLATORS: %(what)s names a number, e.g. "turn number".
            message = L_("That %(what)s is not valid.", what=catalog_text(what))
        super().__init__(message)


class UnknownGame(GameError):
    code = "unknown_game"
    hint = "list_games"

    def __init__(self, number: int, count: int) -> None:
        if count:
            super().__init__(L_("This channel has no game %(number)s (games 1 to %(count)s).",
                                number=number, count=count))
        else:
            super().__init__(L_("This channel has no game %(number)s (no games yet).", number=number))


# --- vote mode


class VoteModeOn(GameError):
    code = "vote_mode"
    hint = "propose_by_vote"

    def __init__(self) -> None:
        super().__init__(L_("This channel plays by vote."))


class VoteModeOff(GameError):
    code = "vote_mode_off"
    hint = "act_directly"

    def __init__(self) -> None:
        super().__init__(L_("This channel does not play by vote."))


class NoOpenRound(GameError):
    code = "no_round"
    hint = "propose_next"

    def __init__(self) -> None:
        super().__init__(L_("That vote round is over."))


class AlreadyProposed(GameError):
    code = "already_proposed"

    def __init__(self, number: int) -> None:
        super().__init__(L_("You already proposed option %(number)s in this round. Vote, or wait for the next round.",
                            number=number))


class RoundFull(GameError):
    code = "round_full"

    def __init__(self, cap: int) -> None:
        super().__init__(Ln_("This round already has %(n)s proposal. Vote for it, or wait for the next round.",
                             "This round already has %(n)s proposals. Vote for one of them, or wait for the next round.",
                             cap))


class UnknownProposal(GameError):
    code = "unknown_proposal"

    def __init__(self) -> None:
        super().__init__(L_("That proposal is not part of the open round. Vote on the current round's message."))


# --- content rules (game.content_rules)


class ContentRefused(GameError):
    """Text a content rule set refused: `rule_set` names it ("the operator's rules", "this
    server's filter", "this server's AutoMod rule <name>"); `what` is the text's role."""

    code = "content_refused"

    def __init__(self, what: str, rule_set: str | Lazy, term: str, text: str) -> None:
        self.what, self.rule_set, self.term, self.text = what, rule_set, term, text
        # TRANSLATORS: %(what)s names what the player typed ("instruction", "reason"); %(rules)s names the
        # rule set that refused it ("the operator's rules", "this server's filter").
        super().__init__(L_("Your %(what)s was refused by %(rules)s. Please rephrase it and try again.",
                            what=Later(field_label, what), rules=rule_set_label(rule_set)))


class FilterTermRefused(GameError):
    code = "filter_term_refused"

    def __init__(self, term: str, reason: str | Lazy) -> None:
        # TRANSLATORS: %(term)s is a filter term as typed, quoted; %(reason)s says what is wrong with it,
        # worded to follow it ("is too long (61 characters; at most 60)").
        super().__init__(L_("The term %(term)s %(reason)s.", term=repr(term), reason=catalog_text(reason)))


class FilterFull(GameError):
    code = "filter_full"
    hint = "filter_remove"

    def __init__(self, cap: int) -> None:
        super().__init__(Ln_("This server's filter already holds %(n)s term, the most it can.",
                             "This server's filter already holds %(n)s terms, the most it can.", cap))


class FilterTermExists(GameError):
    code = "filter_term_exists"
    hint = "filter_shows_it"

    def __init__(self, term: str) -> None:
        super().__init__(L_("%(term)s is already in this server's filter.", term=repr(term)))


class FilterTermUnknown(GameError):
    code = "filter_term_unknown"
    hint = "filter_terms"

    def __init__(self, term: str) -> None:
        super().__init__(L_("%(term)s is not in this server's filter.",
                            term=repr(term)))
