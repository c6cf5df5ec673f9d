"""What the cogs share: the game service as the bot runs it (`GameCog.service`), the /act fields,
and how answers and announcements are written (a notice kept whole, lines as many as fit, a line
to the whole channel)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import discord
from discord import app_commands
from discord.ext import commands

from bot.answers.choices import catalogue_choices, others_choices, split_names
from bot.client import AnimeGamerBot
from bot.parts import context, locale
from bot.parts.embeds import CONTENT_MAX, esc, fit
from bot.parts.service_args import deps_of
from i18n import _, ngettext, use_locale
from service.deps import Deps
from service.players import ActFields
from settings.limits import FIELD_MAX, OTHERS_MAX

Interaction = discord.Interaction[AnimeGamerBot]

# The /act (and /vote propose) options as Discord lets a member type them: settings/limits.py's
# caps, the ones the game's sanitiser holds the text to.
Motion = app_commands.Range[str, 1, FIELD_MAX["motion"]]
Background = app_commands.Range[str, 1, FIELD_MAX["background"]]
Adverb = app_commands.Range[str, 0, FIELD_MAX["adverb"]]
TimeOfDay = app_commands.Range[str, 0, FIELD_MAX["time_of_day"]]
Others = app_commands.Range[str, 0, OTHERS_MAX]


class GameCog(commands.Cog):
    """A cog whose commands call the game service (`self.service`)."""

    def __init__(self, bot: AnimeGamerBot) -> None:
        self.bot = bot

    @cached_property
    def service(self) -> Deps:
        """The game service on the bot's database and queue (a failure to defer reads as the queue
        being down); made at first use: the catalog extraction loads the cogs on a bot without a database."""
        return deps_of(self.bot)


def by(interaction: discord.Interaction) -> str:
    """Who used the command, as a public line names them."""
    return esc(interaction.user.display_name)


def fields(motion: str, background: str, adverb: str | None, time_of_day: str | None, others: str | None) -> ActFields:
    """The /act (and /vote propose) options as the service takes them."""
    return ActFields(motion, background, adverb or "", time_of_day or "", split_names(others))


async def announce(interaction: Interaction, public: Callable[[], str], private: str | None = None) -> None:
    """`public()` to the whole channel, rendered in the server's language (mentions are off
    client-wide); `private`, if any, to the member who asked."""
    with use_locale(await locale.public_for(interaction)):
        text = fit(public(), CONTENT_MAX)
    await interaction.client.board.channel(context.channel_id(interaction), context.guild_id(interaction)).send(text)
    if private is not None:
        await interaction.followup.send(fit(private, CONTENT_MAX), ephemeral=True)


def with_cleaning_notes(text: str, notes) -> str:
    """An answer to /act or /vote propose, plus what sanitising changed in the player's text."""
    if not notes:
        return text
    # TRANSLATORS: %(notes)s lists what was changed in a player's text, separated by semicolons
    return text + "\n" + _("Your text was cleaned: %(notes)s.", notes="; ".join(str(n) for n in notes))


def with_note(text: str, note: str | None) -> str:
    """An answer with a one-time notice (bot.answers.notices) after it, the notice kept whole when the
    answer must be cut to fit a message."""
    if not note:
        return fit(text, CONTENT_MAX)
    note = fit(note, CONTENT_MAX // 2)
    return fit(text, CONTENT_MAX - len(note) - 2) + "\n\n" + note


def lines_within(lines: list[str], limit: int = CONTENT_MAX) -> str:
    """Whole lines, as many as a message holds; the rest said as a count."""
    out: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        more = ngettext("… and %(n)s more", "… and %(n)s more", len(lines) - i)
        if size + len(line) + 1 + len(more) > limit:
            out.append(more)
            break
        out.append(line)
        size += len(line) + 1
    return fit("\n".join(out), limit)


def act_fields(others: str):
    """The /act fields as Discord shows them (names, help, autocomplete from the channel's film
    and cast), shared by /act and /vote propose; `others` is the help of the `with` field."""

    def apply(command):
        command = app_commands.describe(
            motion="What happens, e.g. fly on broomstick",
            background="Where, e.g. sky",
            adverb="How, e.g. quickly",
            time_of_day="When, e.g. night",
            others=others,
        )(command)
        command = app_commands.rename(time_of_day="time", others="with")(command)
        return app_commands.autocomplete(
            motion=catalogue_choices("motions"),
            background=catalogue_choices("backgrounds"),
            adverb=catalogue_choices("adverbs"),
            time_of_day=catalogue_choices("times"),
            others=others_choices,
        )(command)

    return apply
