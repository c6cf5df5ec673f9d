"""Why a game is paused, why a turn was cancelled, why a shot was taken down and how a vote round
ended, as the services store them and as readers see them: one registry of codes, each with its
catalog message, rendered in the reader's locale where it is shown (a member's refusal, the
channel's announcement and posts, the play page).

A row is read in many languages, so it keeps a code (game_sessions.paused_reason, the turns.error
of a cancelled turn, turns.removed_reason, vote_rounds.outcome), never a sentence. What a member
typed (a moderator's reason) and who cancelled are kept apart in columns of their own
(paused_note, cancel_note, cancelled_by_name, removed_note) rather than encoded into the code's
column: the code column then holds codes only, so a moderator's words can never read as a code
(a reason typed as "idle"), and forgetting a member (db.privacy) scrubs their name from the free
columns without touching a code.
"""

from __future__ import annotations

from game.texts import catalog_text
from i18n import L_, Lazy

# --- why a game is paused (game_sessions.paused_reason; NULL: paused with no reason given)

IDLE = "idle"  # nobody played for a while (bot.parts.maintenance)
FILM_WITHDRAWN = "film_withdrawn"  # its film left the film catalogue (service.maintenance.pause_withdrawn)
BY_MODERATOR = "moderator"  # a moderator paused it without words of their own (the play page)
MODERATOR_WORDS = "moderator_words"  # a moderator gave a reason (/mod pause): their words in paused_note

PAUSE_REASONS: dict[str, Lazy | None] = {
    # TRANSLATORS: why a game was paused: nobody played for a while.
    IDLE: L_("idle"),
    # TRANSLATORS: why a game was paused: its film is no longer offered.
    FILM_WITHDRAWN: L_("film withdrawn"),
    BY_MODERATOR: L_("paused by a moderator"),
    MODERATOR_WORDS: None,  # shown as the moderator wrote it
}


def pause_reason(code: str | None, note: str | None = None) -> str | Lazy | None:
    """Why a game is paused, rendered where it is shown; None when no reason was given. Text not
    in the registry (none is written) is shown as stored, translated if the catalogs have it."""
    if not code:
        return None
    if code == MODERATOR_WORDS:
        return note or None
    message = PAUSE_REASONS.get(code)
    return catalog_text(code) if message is None else message


def pause_text(code: str | None, note: str | None = None) -> str:
    """pause_reason as text in the current locale ("" for none): the play page's `paused_reason`."""
    reason = pause_reason(code, note)
    return "" if reason is None else str(reason)


# --- why a turn was cancelled (turns.error of a cancelled turn)

CANCELLED = "cancelled"  # no reason given
RESET = "reset"  # the game was reset (db.sessions.reset)
REMOVED = "removed"  # the shot was taken down while it waited (db.removal)
CANCELLED_BY_AUTHOR = "cancelled_by_author"  # its author, named in cancelled_by_name
# A moderator: named in cancelled_by_name (none: the play page's, "a moderator"), with their
# words, if they gave any, in cancel_note.
CANCELLED_BY_MODERATOR = "cancelled_by_moderator"

CANCEL_REASONS: dict[str, Lazy] = {
    # TRANSLATORS: why a turn did not run.
    CANCELLED: L_("cancelled"),
    RESET: L_("the game was reset"),
    # TRANSLATORS: why a shot is gone: a moderator or its author removed it.
    REMOVED: L_("removed"),
    CANCELLED_BY_AUTHOR: L_("cancelled"),  # worded with the name (cancel_reason) when it is kept
    CANCELLED_BY_MODERATOR: L_("cancelled by a moderator"),  # when no name is kept
}
CANCEL_CODES = frozenset(CANCEL_REASONS)


def cancel_reason(code: str | None, by: str | None = None, note: str | None = None) -> str | Lazy:
    """Why a turn was cancelled, rendered where it is shown. Text not in the registry (a reason
    stored before the codes in the server's language, `cancelled by ...`) is shown as stored,
    translated if the catalogs have it."""
    if not code:
        return ""
    if code in (CANCELLED_BY_AUTHOR, CANCELLED_BY_MODERATOR) and by:
        if note:
            # TRANSLATORS: why a turn was cancelled; %(name)s is a moderator's name, %(reason)s their words.
            return L_("cancelled by %(name)s: %(reason)s", name=by, reason=note)
        # TRANSLATORS: why a turn was cancelled; %(name)s is the member who cancelled it.
        return L_("cancelled by %(name)s", name=by)
    message = CANCEL_REASONS.get(code)
    return catalog_text(code) if message is None else message


# --- why a shot was taken down (turns.removed_reason; db.removal.take_down_turns)

# REMOVED (above): taken down with no reason given, by a moderator or its author.
PRIVACY_DELETED = "privacy_deleted"  # its author deleted their data (db.privacy)
REMOVER_WORDS = "remover_words"  # whoever took it down gave a reason: their words in removed_note

REMOVAL_REASONS: dict[str, Lazy | None] = {
    REMOVED: CANCEL_REASONS[REMOVED],
    # TRANSLATORS: why a shot was taken down.
    PRIVACY_DELETED: L_("privacy: its author deleted their data"),
    REMOVER_WORDS: None,  # shown as its remover wrote it
}
REMOVAL_CODES = frozenset(REMOVAL_REASONS)


def removal_reason(code: str | None, note: str | None = None) -> str | Lazy | None:
    """Why a shot was taken down, rendered where it is shown; None for a shot not taken down."""
    if not code:
        return None
    if code == REMOVER_WORDS:
        return note or CANCEL_REASONS[REMOVED]
    message = REMOVAL_REASONS.get(code)
    return catalog_text(code) if message is None else message


# --- how a vote round ended (vote_rounds.outcome; db.votes)

ROUND_WON = "won"  # its winner became a turn: worded from the round itself (service.voting.RoundView)
NO_PROPOSALS = "no_proposals"
VOIDED_MODE = "voided_mode"  # the channel left vote mode
VOIDED_PAUSE = "voided_pause"  # its game was paused
VOIDED_END = "voided_end"  # its game was reset or ended

ROUND_OUTCOMES: dict[str, Lazy] = {
    NO_PROPOSALS: L_("Nobody proposed an action: no turn this round."),
    VOIDED_MODE: L_("Voting was turned off in this channel; this round is void."),
    VOIDED_PAUSE: L_("The game was paused; this round is void and no turn was played."),
    VOIDED_END: L_("The game was reset or ended; this round is void and no turn was played."),
}


def round_outcome(code: str | None) -> str | Lazy:
    """How a round without a winning turn ended, rendered where it is shown ("" while it is open).
    Text not in the registry is shown as stored, translated if the catalogs have it."""
    if not code:
        return ""
    message = ROUND_OUTCOMES.get(code)
    return catalog_text(code) if message is None else message
