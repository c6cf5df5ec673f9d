"""Discord's error answers, and the timeout the fake's wait_* helpers raise."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answer with Discord's JSON error body {"message", "code"[, "errors"]}."""

    def __init__(self, status: int, code: int, message: str, errors: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status = status
        self.body: dict[str, Any] = {"message": message, "code": code}
        if errors:
            self.body["errors"] = errors


def invalid_form(field: str, code: str, message: str) -> ApiError:
    """Discord's 400 "Invalid Form Body" (50035) with one nested field error."""
    errors: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for part in reversed(field.split(".")) if field else ():
        errors = {part: errors}
    return ApiError(400, 50035, "Invalid Form Body", errors)


def unknown(what: str, code: int) -> ApiError:
    """Discord's 404 for a missing resource, e.g. unknown("Channel", 10003)."""
    return ApiError(404, code, f"Unknown {what}")


class FakeDiscordTimeout(AssertionError):
    """A wait_* helper timed out; the message says what was awaited and what the fake holds."""
