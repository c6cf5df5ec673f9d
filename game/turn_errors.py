"""Refusals about turns (asking for one, cancelling, regenerating) and vote rounds. GameErrors
(game.errors), shown the same way."""

from __future__ import annotations

from game.errors import GameError
from game.texts import Later, catalog_text, turn_status, wait_text
from i18n import L_, Lazy
from i18n.translate import Ln_


class BacklogFull(GameError):
    code = "backlog_full"

    def __init__(self, cap: int) -> None:
        super().__init__(Ln_("This game already has %(n)s turn waiting. Try again when it has finished.",
                             "This game already has %(n)s turns waiting. Try again when one has finished.", cap), n=cap)


class Cooldown(GameError):
    code = "cooldown"

    def __init__(self, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        # TRANSLATORS: %(wait)s is a length of time, e.g. "27 seconds".
        super().__init__(L_("Slow down: you can act again in %(wait)s.", wait=Later(wait_text, seconds_left)),
                         seconds_left=seconds_left)


class ServerQuota(GameError):
    """The server has started as many turns in the last hour as the operator allows it."""

    code = "server_quota"

    def __init__(self, limit: int, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        # TRANSLATORS: %(wait)s is a length of time, e.g. "12 minutes".
        super().__init__(Ln_("This server has played its %(n)s turn of the past hour; its next turn is possible in %(wait)s.",
                             "This server has played its %(n)s turns of the past hour; its next turn is possible in %(wait)s.",
                             limit, wait=Later(wait_text, seconds_left)),
                         n=limit, seconds_left=seconds_left)


class MemberQuota(GameError):
    """The member has started as many turns here in the last hour as the operator allows one member."""

    code = "member_quota"

    def __init__(self, limit: int, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        # TRANSLATORS: %(wait)s is a length of time, e.g. "12 minutes".
        super().__init__(Ln_("You have played your %(n)s turn of the past hour on this server; you can act again in %(wait)s.",
                             "You have played your %(n)s turns of the past hour on this server; you can act again in %(wait)s.",
                             limit, wait=Later(wait_text, seconds_left)),
                         n=limit, seconds_left=seconds_left)


class TurnNotFound(GameError):
    code = "turn_not_found"

    def __init__(self, turn: int | str) -> None:
        super().__init__(L_("Turn %(turn)s was not found in this game.", turn=turn), turn=turn)


class TurnNotCancellable(GameError):
    code = "not_cancellable"

    def __init__(self, status: str) -> None:
        # TRANSLATORS: %(status)s is a turn's status: running, done, failed or cancelled.
        super().__init__(L_("That turn is %(status)s; only queued turns can be cancelled.", status=turn_status(status)),
                         status=status)


class TurnNotFinished(GameError):
    code = "not_finished"

    def __init__(self, status: str) -> None:
        # TRANSLATORS: %(status)s is a turn's status: queued or running.
        super().__init__(L_("The latest turn is still %(status)s; wait for it to finish before regenerating it.",
                            status=turn_status(status)), status=status)


class NotTurnAuthor(GameError):
    code = "not_author"

    def __init__(self, author: str | Lazy, what: str) -> None:
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
        super().__init__(message, author=author, action=what)


class NoTurnToRegenerate(GameError):
    code = "no_turn_to_regenerate"

    def __init__(self) -> None:
        super().__init__(L_("This game has no finished turn to regenerate."))


class NotLatestTurn(GameError):
    code = "not_latest"

    def __init__(self, seq: int, latest: int) -> None:
        super().__init__(L_("Only the game's latest turn (#%(latest)s) can be regenerated; this is turn #%(seq)s.",
                            latest=latest, seq=seq), latest=latest, seq=seq)


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
                            number=number), number=number)


class RoundFull(GameError):
    code = "round_full"

    def __init__(self, cap: int) -> None:
        super().__init__(Ln_("This round already has %(n)s proposal. Vote for it, or wait for the next round.",
                             "This round already has %(n)s proposals. Vote for one of them, or wait for the next round.",
                             cap), n=cap)


class UnknownProposal(GameError):
    code = "unknown_proposal"

    def __init__(self) -> None:
        super().__init__(L_("That proposal is not part of the open round. Vote on the current round's message."))
