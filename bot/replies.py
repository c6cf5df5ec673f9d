"""Turning exceptions into the ephemeral reply a member sees.

Every refusal's wording lives in game/errors.py; this module only decides which refusal an
exception is and delivers it (as the first response, or as a follow-up once deferred).
"""

from __future__ import annotations

import logging
import secrets

import discord
from discord import app_commands
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, TimeoutError as PoolTimeout

from db.engine import is_connection_failure
from game.errors import GameError, InternalError, ServiceDown, TextRefused
from game.sanitize import InputRefused

log = logging.getLogger(__name__)


class Refusal(app_commands.CheckFailure):
    """A GameError raised from a check (checks must raise AppCommandError to reach on_error)."""

    def __init__(self, error: GameError):
        super().__init__(error.message)
        self.error = error


class QueueDown(RuntimeError):
    """Deferring a turn's job failed; the transaction that would have inserted the turn is rolled back."""


def _service_down(exc: BaseException) -> bool:
    # Only network-level OSErrors are the database's: a missing program or file is a bug of ours.
    if isinstance(exc, (OperationalError, InterfaceError, PoolTimeout)) or is_connection_failure(exc):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    try:
        import asyncpg

        return isinstance(exc, (asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError, asyncpg.InterfaceError))
    except ImportError:  # pragma: no cover
        return False


def as_game_error(exc: BaseException) -> GameError | None:
    """The refusal an exception stands for; None for a bug (logged and answered generically)."""
    if isinstance(exc, app_commands.CommandInvokeError):
        exc = exc.original
    if isinstance(exc, Refusal):
        return exc.error
    if isinstance(exc, GameError):
        return exc
    if isinstance(exc, InputRefused):
        return TextRefused(exc.field_name, exc.reason)
    if isinstance(exc, QueueDown):
        return ServiceDown("the generation queue")
    if _service_down(exc) or (exc.__cause__ is not None and _service_down(exc.__cause__)):
        return ServiceDown()
    return None


async def send_ephemeral(interaction: discord.Interaction, text: str) -> None:
    try:
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=True)
        else:
            await interaction.response.send_message(text, ephemeral=True)
    except discord.HTTPException:  # the token expired or the interaction is gone: nothing to tell
        log.warning("could not deliver a reply to interaction %s", interaction.id)


def new_reference() -> str:
    """A short id that ties what a member is shown to the logged traceback (8 hex digits)."""
    return secrets.token_hex(4)


async def report(interaction: discord.Interaction, exc: BaseException) -> None:
    """Answer a failed command or button with what to do next."""
    err = as_game_error(exc)
    if err is None:
        if isinstance(exc, app_commands.CommandInvokeError):
            exc = exc.original
        ref = new_reference()
        where = interaction.command.qualified_name if interaction.command else interaction.data
        log.error("internal error (reference %s) in %s by user %s in channel %s", ref, where,
                  interaction.user.id, interaction.channel_id, exc_info=exc)
        await send_ephemeral(interaction, InternalError(ref).message)
    else:
        # Refusals quote what people typed (names, reasons): shown as typed, not as Markdown.
        await send_ephemeral(interaction, discord.utils.escape_markdown(err.message))
