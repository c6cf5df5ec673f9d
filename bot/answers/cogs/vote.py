"""/vote: a channel an admin put in vote mode plays by rounds. Members propose actions
(/vote propose, the /act fields), everyone votes with the round message's buttons, and the
winner becomes the turn (the rules are in service/voting.py).

The buttons are DynamicItems (`ag:vote:<proposal>`), so they keep working after a restart. The
rounds' deadlines are in Postgres; a job on the bot's scheduler closes due rounds every few
seconds (and at once when the last joined player votes), so a restarted bot closes a round that
fell due while it was down, and shows the result of one it closed but had not shown yet.
"""

from __future__ import annotations

import asyncio
import logging
import re

import discord
from discord import app_commands

from bot.answers import checks, replies
from bot.answers.cogs.shared import (
    Adverb,
    Background,
    GameCog,
    Interaction,
    Motion,
    Others,
    TimeOfDay,
    act_fields,
    announce,
    by,
    fields,
    with_cleaning_notes,
    with_note,
)
from bot.answers.notices import english_note
from bot.client import AnimeGamerBot
from bot.parts import locale
from bot.parts.acks import think
from bot.parts.buttons import view_of
from bot.parts.embeds import (
    DESCRIPTION_MAX,
    DONE,
    EMBED_MAX,
    FIELD_NAME_MAX,
    FOOTER_MAX,
    INFO,
    TITLE_MAX,
    WAITING,
    esc,
    fit,
    fit_embed,
    fit_label,
    person,
)
from bot.parts.locale import LocalizedItem
from bot.parts.service_args import member, place
from i18n import _, ngettext, pgettext
from i18n.formatting import number
from i18n.translate import Lp_
from service import voting

log = logging.getLogger(__name__)

CHECK_SECONDS = 2.0  # how often due rounds are looked for (at most; the sweep interval if shorter)
ROUND_STATES = {  # a round's status as its title shows it
    "open": Lp_("vote round", "open"),
    "closed": Lp_("vote round", "closed"),
    "void": Lp_("vote round", "void"),
}
PROPOSAL_MAX = 1000  # the most of a proposal's text shown (less when many would overflow the embed)


def round_embed(v: voting.RoundView, film_title: str) -> discord.Embed:
    """A round's public message, in the current locale (the caller's: the server's language)."""
    rnd = v.round
    if rnd.status == "open":
        until = f"<t:{int(rnd.deadline.timestamp())}:R>"
        if v.players:
            # TRANSLATORS: %(until)s is a relative time Discord shows in the reader's language ("in 2 minutes")
            desc = ngettext(
                "Propose an action with /vote propose. Everyone votes with the buttons: one vote each, vote again "
                "to change it. The round closes %(until)s, or as soon as its %(n)s player has voted. "
                "A tie goes to the earliest proposal.",
                "Propose an action with /vote propose. Everyone votes with the buttons: one vote each, vote again "
                "to change it. The round closes %(until)s, or as soon as all %(n)s players have voted. "
                "A tie goes to the earliest proposal.",
                v.players, until=until)
        else:
            desc = _("Propose an action with /vote propose. Everyone votes with the buttons: one vote each, vote again "
                     "to change it. The round closes %(until)s. A tie goes to the earliest proposal.", until=until)
        colour = WAITING
    else:
        desc = esc(v.outcome_text())  # in the current locale (stored as a code)
        colour = DONE if rnd.turn_id else INFO
    state = ROUND_STATES.get(rnd.status)
    # TRANSLATORS: a vote round's title; %(state)s is open, closed or void
    title = fit(_("Vote · %(state)s", state=state if state is not None else rnd.status), TITLE_MAX)
    e = discord.Embed(title=title, description=fit(desc, DESCRIPTION_MAX), colour=colour)
    footer = fit(_("%(film)s · %(votes)s · %(voted)s", film=film_title,
                   votes=ngettext("%(n)s vote", "%(n)s votes", v.voters),
                   voted=ngettext("%(voted)s of %(n)s player voted", "%(voted)s of %(n)s players voted", v.players,
                                  voted=number(v.players_voted))), FOOTER_MAX)
    names = []
    for o in v.options:
        author, votes_of = person(o.proposal.author_name)[:150], ngettext("%(n)s vote", "%(n)s votes", o.votes)
        if v.winner is not None and v.winner.number == o.number:
            name = _("%(number)s. %(author)s · %(votes)s · winner", number=o.number, author=author, votes=votes_of)
        else:
            name = _("%(number)s. %(author)s · %(votes)s", number=o.number, author=author, votes=votes_of)
        names.append(fit(name, FIELD_NAME_MAX))
    # Discord refuses an embed over 6000 characters: the proposals share what is left
    left = EMBED_MAX - len(title) - len(e.description or "") - len(footer) - sum(map(len, names)) - 50
    each = max(20, min(PROPOSAL_MAX, left // max(1, len(names))))
    for o, name in zip(v.options, names, strict=True):
        # an empty text: a shot taken down (db.removal)
        e.add_field(name=name, value=fit(esc(o.proposal.instruction), each) or _("(removed)"), inline=False)
    if not v.options:
        e.add_field(name=_("Proposals"), value=_("none yet"), inline=False)
    e.set_footer(text=footer)
    return fit_embed(e)


class VoteButton(LocalizedItem, discord.ui.DynamicItem[discord.ui.Button], template=r"ag:vote:(?P<proposal>\d+)"):
    """One per proposal on a round's message: a member's vote (clicking another moves it). Its
    label is in the round message's language; its answers in the voter's."""

    def __init__(self, proposal_id: int, number: int = 0) -> None:
        label = pgettext("button", "Vote %(number)s", number=number) if number else pgettext("button", "Vote")
        super().__init__(
            discord.ui.Button(label=fit_label(label), style=discord.ButtonStyle.primary,
                              custom_id=f"ag:vote:{proposal_id}")
        )
        self.proposal_id = proposal_id

    @classmethod
    async def from_custom_id(cls, interaction: Interaction, item: discord.ui.Button, match: re.Match[str]):
        return cls(int(match["proposal"]))

    async def callback(self, interaction: Interaction) -> None:
        try:
            await think(interaction)
            cog = interaction.client.get_cog("Vote")
            if not isinstance(cog, Vote):  # the button is registered by the cog, removed with it
                raise RuntimeError("a vote button was clicked while the Vote cog is not loaded")
            rnd, option = await voting.vote(cog.service, self.proposal_id, interaction.user.id)
            await cog.refresh(rnd.id)
            await interaction.followup.send(
                _("You voted for option %(number)s. You can change your vote until the round closes.", number=option),
                ephemeral=True,
            )
            await cog.tick()  # the last joined player's vote closes the round at once
        except Exception as e:
            await replies.report(interaction, e)


class Vote(GameCog):
    vote = app_commands.Group(name="vote", description="Play this channel's game by vote", guild_only=True)

    def __init__(self, bot: AnimeGamerBot) -> None:
        super().__init__(bot)
        self._tick_lock = asyncio.Lock()
        self._locks: dict[int, asyncio.Lock] = {}  # one message update at a time per round

    async def cog_load(self) -> None:
        self.bot.add_dynamic_items(VoteButton)
        self.bot.vote_rounds.register(self)
        every = min(CHECK_SECONDS, self.bot.maintenance.sweep_seconds)
        self.bot.maintenance.repeat("vote_rounds", self.tick, every)

    async def cog_unload(self) -> None:  # also when the bot closes
        self.bot.remove_dynamic_items(VoteButton)
        self.bot.vote_rounds.unregister(self)
        self.bot.maintenance.stop("vote_rounds")

    # --- the round's message

    async def refresh(self, round_id: int) -> None:
        """Post or edit the round's message with its current proposals and votes; a finished
        round's message shows the outcome without buttons, and is then marked shown. Edits go
        through the channel's edit scheduler: an open round's coalesce to the latest; the
        closing one is final (awaited, ahead of routine edits)."""
        async with self._locks.setdefault(round_id, asyncio.Lock()):
            shown = await voting.round_shown(self.service, round_id)
            v, rnd = shown.view, shown.view.round
            async with locale.public(self.bot, rnd.guild_id, rnd.channel_id):  # the message and its buttons' labels
                embed = round_embed(v, shown.film.title_in())
                view = view_of(*(VoteButton(o.proposal.id, o.number) for o in v.options)) if rnd.status == "open" else None
            try:
                if rnd.message_id is None:
                    channel = self.bot.board.channel(rnd.channel_id, rnd.guild_id)
                    msg = await channel.send(embed=embed, view=view) if view else await channel.send(embed=embed)
                    await voting.set_message(self.service, rnd.id, msg.id)
                elif rnd.status == "open":
                    self.bot.edits.routine(rnd.channel_id, rnd.message_id, embed=embed, view=view)
                else:
                    await self.bot.edits.final(rnd.channel_id, rnd.message_id, embed=embed, view=None)
            except (discord.NotFound, discord.Forbidden):
                pass  # the message was deleted, or the bot may not post here: trying again will not help
            except discord.HTTPException as e:
                log.warning("vote round %s: could not update its message: %s", rnd.id, e)
                return
            if rnd.status != "open":
                await voting.mark_shown(self.service, rnd.id)
                self._locks.pop(round_id, None)

    # --- closing

    async def tick(self) -> None:
        """Close the due rounds of this bot's guilds and show every result not shown yet."""
        async with self._tick_lock:
            guild_ids = [g.id for g in self.bot.guilds]
            if not guild_ids:
                return
            try:
                closed = await voting.close_due(self.service, guild_ids)
                for c in closed:
                    if c.turn is not None:
                        await self.bot.board.announce_queued(c.turn.id, c.position)
                unshown = await voting.unshown(self.service, guild_ids)
            except Exception as e:
                log.warning("checking vote rounds failed: %s", e)
                return
            for rnd in unshown:
                await self.refresh(rnd.id)

    # --- commands

    @vote.command(name="propose", description="Propose the next turn's action; the round's vote decides")
    @act_fields(others="Characters in the shot besides yours, separated by commas (name one if you play none)")
    async def propose(
        self,
        interaction: Interaction,
        motion: Motion,
        background: Background,
        adverb: Adverb | None = None,
        time_of_day: TimeOfDay | None = None,
        others: Others | None = None,
    ) -> None:
        automod = await self.bot.automod.for_interaction(interaction)
        done = await voting.propose(self.service, place(interaction), member(interaction),
                                    fields(motion, background, adverb, time_of_day, others), automod)
        await self.refresh(done.round.id)
        text = with_cleaning_notes(_("Your proposal is option %(number)s: %(text)s", number=done.option,
                                     text=esc(done.instruction.text)), done.instruction.notes)
        note = await english_note(self.bot, interaction, [motion, background, adverb, time_of_day], film=done.film)
        await interaction.followup.send(with_note(text, note), ephemeral=True)

    @vote.command(name="open", description="Open a vote round now (the first proposal also opens one)")
    async def open_now(self, interaction: Interaction) -> None:
        rnd, created = await voting.open_round(self.service, place(interaction), interaction.user.id)
        await self.refresh(rnd.id)
        text = _("A vote round is open: propose with /vote propose.") if created else _("A round is already open: vote on its message.")
        await interaction.followup.send(text, ephemeral=True)

    @vote.command(name="mode", description="Admins: play this channel by vote, or back to /act", extras={"rights": "admin"})
    @app_commands.describe(enabled="Vote mode on or off", seconds="How long a round stays open (default 120)")
    @checks.rights("admin")
    async def mode(
        self, interaction: Interaction, enabled: bool,
        seconds: app_commands.Range[int, voting.MIN_ROUND_SECONDS, voting.MAX_ROUND_SECONDS] | None = None,
    ) -> None:
        cfg, voided = await voting.set_mode(self.service, place(interaction), member(interaction), enabled, seconds)
        for rnd in voided:
            await self.refresh(rnd.id)
        name, seconds = by(interaction), cfg.round_seconds
        if enabled:
            await announce(interaction, lambda: _("%(name)s turned on vote mode: propose actions with /vote propose, vote on "
                                                  "the round's message; each round lasts %(seconds)s s.",
                                                  name=name, seconds=number(seconds)),
                           # TRANSLATORS: %(seconds)s s is a number of seconds ("90 s")
                           _("Vote mode is on (%(seconds)s s rounds).", seconds=number(seconds)))
        else:
            await announce(interaction, lambda: _("%(name)s turned off vote mode: players act with /act again.", name=name),
                           _("Vote mode is off."))


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Vote(bot))
