"""Turning exceptions into the ephemeral reply a member sees.

Every refusal's wording lives in game/errors.py; this module only decides which refusal an
exception is and delivers it (as the first response, or as a follow-up once deferred). A refusal
is rendered here, in the member's language (the interaction check adopted it), and fitted to
Discord's 2,000 characters.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import discord
from discord import app_commands

from bot.parts import audit
from bot.parts.embeds import CONTENT_MAX, fit
from bot.parts.hints import BOT_HINTS
from bot.parts.service_args import deps_of, member, place
from game.content_errors import ContentRefused, TextRefused
from game.content_rules import rule_set_code
from game.errors import GameError, InternalError, ServiceDown, new_reference
from game.sanitize import InputRefused
from service.jobs import QueueDown
from service.runtime import outage

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

log = logging.getLogger(__name__)


class Refusal(app_commands.CheckFailure):
    """A GameError raised from a check (checks must raise AppCommandError to reach on_error)."""

    def __init__(self, error: GameError):
        super().__init__(error.message)
        self.error = error


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
    if outage(exc) is not None:  # the one classification of transient database errors
        return ServiceDown()
    return None


async def send_ephemeral(interaction: discord.Interaction, text: str) -> None:
    text = fit(text, CONTENT_MAX)
    try:
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=True)
        else:
            await interaction.response.send_message(text, ephemeral=True)
    except discord.HTTPException:  # the token expired or the interaction is gone: nothing to tell
        log.warning("could not deliver a reply to interaction %s", interaction.id)


async def record_refusal(interaction: discord.Interaction[AnimeGamerBot], refused: ContentRefused) -> None:
    """A text the content rules refused (`<what>_refused`: instruction_refused, reason_refused),
    in a transaction of its own: the command's was rolled back with the refusal. Best effort: a
    database that is down loses the entry, never the member's answer."""
    command = interaction.command.qualified_name if interaction.command else None
    try:
        rule_set, rule = rule_set_code(audit.rule_set_name(refused.rule_set))  # a code, the AutoMod rule's name apart
        await deps_of(interaction.client).record_alone(
            place(interaction), member(interaction), f"{refused.what}_refused", command and f"/{command}",
            rule_set=rule_set, **({"rule": rule} if rule is not None else {}), term=refused.term, text=refused.text)
    except Exception as e:
        log.warning("could not record a refused %s in the audit log: %s", refused.what, e)


async def report(interaction: discord.Interaction[AnimeGamerBot], exc: BaseException) -> None:
    """Answer a failed command or button with what to do next."""
    err = as_game_error(exc)
    # A check that said no (discord.py's own, like guild_only, included) is a refusal, not a bug.
    # Every refusal and error passes here: the interaction's outcome for the metrics (bot.parts.interaction_meter).
    refused = err is not None or isinstance(exc, app_commands.CheckFailure)
    interaction.client.interaction_meter.outcome(interaction, "refused" if refused else "error")
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
        await send_ephemeral(interaction, discord.utils.escape_markdown(err.shown(BOT_HINTS)))
        if isinstance(err, ContentRefused):
            await record_refusal(interaction, err)  # the audit log (and the moderation log) see it
