"""Refusals about taking a shot down and reporting it (the bot's remove and report commands, and
its moderation log channel). The same GameError as game.errors, so the bot shows
them as written, with the face's hint for what to do next (game.errors.GameError.shown). Lazy catalog messages, like game.errors'."""

from __future__ import annotations

from game.errors import GameError
from game.texts import Later, catalog_text, listed, turn_status, wait_text
from i18n import L_, Lazy
from i18n.translate import Ln_


class NotAShot(GameError):
    code = "not_a_shot"

    def __init__(self) -> None:
        super().__init__(L_("That message is not one of this server's game shots. Use this on a turn's post."))


class ShotNotFinished(GameError):
    code = "shot_not_finished"
    hint = "cancel_or_wait"

    def __init__(self, seq: int, status: str) -> None:
        # TRANSLATORS: %(status)s is a turn's status: queued or running.
        super().__init__(L_("Turn #%(seq)s is still %(status)s.", seq=seq, status=turn_status(status)), seq=seq, status=status)


class ShotAlreadyRemoved(GameError):
    code = "shot_already_removed"

    def __init__(self, seq: int) -> None:
        super().__init__(L_("Turn #%(seq)s was already removed. Nothing else to do.", seq=seq), seq=seq)


class NotShotAuthor(GameError):
    code = "not_shot_author"

    def __init__(self, author: str | Lazy) -> None:
        # TRANSLATORS: %(author)s is a member's display name; "Report shot" is the message command's name.
        super().__init__(L_("Only %(author)s (who asked for this shot) or a moderator can remove it. "
                            "Use Report shot to tell the moderators.", author=author), author=author)


class NoLogChannel(GameError):
    code = "no_log_channel"
    hint = "set_log_channel"

    def __init__(self) -> None:
        super().__init__(L_("This server has no moderation log channel, so reports have nowhere to go."))


class LogChannelUnusable(GameError):
    code = "log_channel_unusable"

    def __init__(self, channel: str, missing: list[str] | list[str | Lazy]) -> None:
        # Permission names as Discord shows them; translated where shown when the catalogs have them.
        permissions = listed([catalog_text(m) for m in missing])
        # TRANSLATORS: %(channel)s is a channel mention; %(permissions)s lists Discord permissions
        # ("Send Messages and Embed Links").
        super().__init__(Ln_(
            "I cannot post in %(channel)s: I need %(permissions)s there. Give me that permission, or choose another channel.",
            "I cannot post in %(channel)s: I need %(permissions)s there. Give me those permissions, or choose another channel.",
            len(missing), channel=channel, permissions=permissions,
        ), channel=channel, permissions=[str(m) for m in missing])


class ReportCooldown(GameError):
    code = "report_cooldown"

    def __init__(self, seconds_left: float) -> None:
        # TRANSLATORS: %(wait)s is a length of time, e.g. "27 seconds".
        super().__init__(L_("You sent a report a moment ago; you can report again in %(wait)s.",
                            wait=Later(wait_text, seconds_left)), seconds_left=seconds_left)
