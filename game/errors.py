"""Refusals a player or moderator sees: a code, a message that says what went wrong, the values
apart from the message (`params`), and a `hint` key for what to do next.

The bot shows them as ephemeral replies and the play page as error toasts, so the wording lives
in the refusal modules, once: this one (the base, refusals any command may meet, the film
catalogue's and a game's export's), game.session_errors (a game and its players),
game.turn_errors (turns and vote rounds), game.content_errors (what people type) and
game.shot_errors (taking a shot down, reporting it). What to do next is each
face's to say (`GameError.shown`): the bot names its commands (bot.parts.hints), the page its buttons
(play.errors), so no message names either. Every message is a lazy catalog message (i18n.L_):
built where the refusal is raised, rendered in the locale current where it is shown (the
member's, the page's). Values that depend on the locale too (a list, a size, a wait) are
placeholders rendered then (game.texts.Later).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from game.texts import Later, _choices, catalog_text, size_text, wait_text
from i18n import L_, Lazy

# A refusal's parameter as it leaves the process (the page's JSON, a stored entry).
Param = str | int | float | list[str]


def _json_safe(value: object) -> Param:
    """A parameter as JSON keeps it: numbers and text as they are, a list as its items' text, and
    anything rendered in the locale (a lazy name, a status) as text in the locale current now."""
    if isinstance(value, int | float | str):
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [str(v) for v in value]
    return str(value)


class GameError(Exception):
    """A refusal with a message meant for the person who asked, and its values apart from the
    message (`params`, named as the message's placeholders where it has them)."""

    code = "refused"
    hint: str | None = None  # the key of what to do next, which each face words its own way

    def __init__(self, message: str | Lazy, **params: object):
        super().__init__(message)
        self._message = message
        self._params = params

    @property
    def message(self) -> str:
        """The refusal in the locale current where it is shown (a member's answer, a page's toast)."""
        return str(self._message)

    @property
    def params(self) -> dict[str, Param]:
        """The values the refusal was raised with, JSON-safe (None ones left out): what was typed,
        a limit, a wait in seconds. A value worded in the locale is rendered in the current one."""
        return {k: _json_safe(v) for k, v in self._params.items() if v is not None}

    def shown(self, hints: Mapping[str, object]) -> str:
        """The message, then the face's hint for it (rendered in the current locale), if it has one."""
        hint = hints.get(self.hint) if self.hint else None
        return self.message if hint is None else sentences(self.message, str(hint))

    def __str__(self) -> str:
        return self.message


def sentences(first: str, second: str) -> str:
    """Two sentences as one text: a space after a Latin full stop, none after a CJK one."""
    return first + ("" if first.endswith(("。", "）", "！", "？")) else " ") + second


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
        super().__init__(message, service=what)


class GuildOnly(GameError):
    code = "guild_only"

    def __init__(self) -> None:
        super().__init__(L_("Games run in server channels. Use this command in a channel of a server."))


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
        super().__init__(self.MESSAGES[kind], rights=kind)


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
        ), reference=reference)


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
        super().__init__(message, what=what)


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
            super().__init__(L_("Unknown film %(film)s. Choose %(films)s.", film=repr(film_id), films=_choices(known)),
                             film=film_id, films=known)
        else:
            super().__init__(L_("Unknown film %(film)s. No film is offered here.", film=repr(film_id)), film=film_id, films=[])


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
        ), film=film_id)


class FilmFixed(GameError):
    code = "film_fixed"
    hint = "film_option"

    def __init__(self, title: str | Lazy) -> None:
        # TRANSLATORS: %(film)s is a film's title.
        super().__init__(L_("This channel plays %(film)s.", film=title), film=title)


# --- exporting a game as one video (bot.answers.export)


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
        ), limit_bytes=limit_bytes)


class ExportCooldown(GameError):
    code = "export_cooldown"

    def __init__(self, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        # TRANSLATORS: %(wait)s is a length of time, e.g. "60 seconds".
        super().__init__(L_("You exported a video a moment ago; you can export again in %(wait)s.",
                            wait=Later(wait_text, seconds_left)), seconds_left=seconds_left)
