"""The look of the bot's persistent buttons (`ag:cancel:<turn>`, `ag:regen:<turn>`): what the
status board and the notifier put on public messages. A button's label is rendered when it is
made, in the locale current then (the server's: bot.parts.locale.public around the build). The clicks
are answered by bot.answers.views, whose DynamicItems match these custom_ids after any restart."""

from __future__ import annotations

from dataclasses import dataclass

import discord

from bot.parts.embeds import fit_label
from i18n import Lazy
from i18n.translate import Lp_


@dataclass(frozen=True)
class TurnButton:
    """A button acting on one turn: custom_id = f"{prefix}:{turn id}"."""

    label: Lazy
    style: discord.ButtonStyle
    prefix: str

    @property
    def template(self) -> str:
        """The custom_id's pattern, with the turn id as `turn`."""
        return rf"{self.prefix}:(?P<turn>\d+)"

    def button(self, turn_id: int) -> discord.ui.Button:
        return discord.ui.Button(label=fit_label(self.label), style=self.style, custom_id=f"{self.prefix}:{turn_id}")


CANCEL = TurnButton(Lp_("button", "Cancel"), discord.ButtonStyle.secondary, "ag:cancel")  # a queued turn's status message
REGENERATE = TurnButton(Lp_("button", "Regenerate"), discord.ButtonStyle.primary, "ag:regen")  # a posted turn


def view_of(*items: discord.ui.Item) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for item in items:
        view.add_item(item)
    return view
