"""Refusals about taking a shot down and reporting it (/mod remove, the "Remove shot" and "Report
shot" message commands, /admin log-channel). The same GameError as game.errors, so the bot shows
them as written; each says what to do next."""

from __future__ import annotations

import math

from game.errors import GameError


class NotAShot(GameError):
    code = "not_a_shot"

    def __init__(self) -> None:
        super().__init__("That message is not one of this server's game shots. Use this on a turn's post.")


class ShotNotFinished(GameError):
    code = "shot_not_finished"

    def __init__(self, seq: int, status: str) -> None:
        super().__init__(f"Turn #{seq} is still {status}. Cancel it with /mod cancel, or wait for its post.")


class ShotAlreadyRemoved(GameError):
    code = "shot_already_removed"

    def __init__(self, seq: int) -> None:
        super().__init__(f"Turn #{seq} was already removed. Nothing else to do.")


class NotShotAuthor(GameError):
    code = "not_shot_author"

    def __init__(self, author: str) -> None:
        super().__init__(f"Only {author} (who asked for this shot) or a moderator can remove it. Use Report shot to tell the moderators.")


class NoLogChannel(GameError):
    code = "no_log_channel"

    def __init__(self) -> None:
        super().__init__("This server has no moderation log channel, so reports have nowhere to go. "
                         "Tell a moderator directly; an admin can set one with /admin log-channel.")


class LogChannelUnusable(GameError):
    code = "log_channel_unusable"

    def __init__(self, channel: str, missing: list[str]) -> None:
        them = "that permission" if len(missing) == 1 else "those permissions"
        super().__init__(f"I cannot post in {channel}: I need {' and '.join(missing)} there. Give me {them}, or choose another channel.")


class ReportCooldown(GameError):
    code = "report_cooldown"

    def __init__(self, seconds_left: float) -> None:
        super().__init__(f"You sent a report a moment ago; you can report again in {math.ceil(seconds_left)} s.")
