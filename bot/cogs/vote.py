"""/vote: a channel an admin put in vote mode plays by rounds. Members propose actions
(/vote propose, the /act fields), everyone votes with the round message's buttons, and the
winner becomes the turn (the rules are in db/votes.py).

The buttons are DynamicItems (`ag:vote:<proposal>`), so they keep working after a restart. The
rounds' deadlines are in Postgres; a job on the bot's scheduler closes due rounds every few
seconds (and at once when the last joined player votes), so a restarted bot closes a round that
fell due while it was down, and shows the result of one it closed but had not shown yet.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import audit as bot_audit
from bot import checks, context, replies
from bot.cogs.play import act_fields, split_names, with_cleaning_notes
from bot.embeds import DONE, INFO, WAITING, esc
from bot.views import view_of
from db import guilds, votes
from db import sessions as game_sessions
from db import turns as turn_service
from game.catalogue import display_film, session_film

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

log = logging.getLogger(__name__)

CHECK_SECONDS = 2.0  # how often due rounds are looked for (at most; the sweep interval if shorter)


def round_embed(v: votes.RoundView, film_title: str) -> discord.Embed:
    rnd = v.round
    if rnd.status == "open":
        until = f"<t:{int(rnd.deadline.timestamp())}:R>"
        everyone = f", or as soon as all {v.players} players have voted" if v.players else ""
        desc = (
            "Propose an action with /vote propose. Everyone votes with the buttons: one vote each, "
            f"vote again to change it. The round closes {until}{everyone}. "
            "A tie goes to the earliest proposal."
        )
        colour = WAITING
    else:
        desc = esc(rnd.outcome or "")
        colour = DONE if rnd.turn_id else INFO
    e = discord.Embed(title=f"Vote · {rnd.status}", description=desc, colour=colour)
    for o in v.options:
        won = " · winner" if v.winner is not None and v.winner.number == o.number else ""
        e.add_field(
            name=f"{o.number}. {esc(o.proposal.author_name)[:150]} · {o.votes} vote(s){won}",
            value=esc(o.proposal.instruction)[:1000] or "(removed)",  # a shot taken down (db.removal)
            inline=False,
        )
    if not v.options:
        e.add_field(name="Proposals", value="none yet", inline=False)
    e.set_footer(text=f"{film_title} · {v.voters} vote(s) · {v.players_voted} of {v.players} players voted")
    return e


class VoteButton(discord.ui.DynamicItem[discord.ui.Button], template=r"ag:vote:(?P<proposal>\d+)"):
    """One per proposal on a round's message: a member's vote (clicking another moves it)."""

    def __init__(self, proposal_id: int, number: int = 0) -> None:
        super().__init__(
            discord.ui.Button(label=f"Vote {number}" if number else "Vote", style=discord.ButtonStyle.primary,
                              custom_id=f"ag:vote:{proposal_id}")
        )
        self.proposal_id = proposal_id

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Button, match: re.Match[str]):
        return cls(int(match["proposal"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        bot = context.bot_of(interaction)
        try:
            await interaction.response.defer(ephemeral=True, thinking=True)
            cog = bot.get_cog("Vote")
            if not isinstance(cog, Vote):  # the button is registered by the cog, removed with it
                raise RuntimeError("a vote button was clicked while the Vote cog is not loaded")
            async with bot.db.sessions.begin() as s:
                rnd, number = await votes.vote(s, self.proposal_id, interaction.user.id)
            await cog.refresh(rnd.id)
            await interaction.followup.send(
                f"You voted for option {number}. You can change your vote until the round closes.", ephemeral=True
            )
            await cog.tick()  # the last joined player's vote closes the round at once
        except Exception as e:
            await replies.report(interaction, e)


class Vote(commands.Cog):
    vote = app_commands.Group(name="vote", description="Play this channel's game by vote", guild_only=True)

    def __init__(self, bot: AnimeGamerBot) -> None:
        self.bot = bot
        self._tick_lock = asyncio.Lock()
        self._locks: dict[int, asyncio.Lock] = {}  # one message update at a time per round

    async def cog_load(self) -> None:
        self.bot.add_dynamic_items(VoteButton)
        every = min(CHECK_SECONDS, self.bot.maintenance.sweep_seconds)
        self.bot.maintenance.scheduler.add_job(
            self.tick, "interval", seconds=every, id="vote_rounds", coalesce=True, max_instances=1, misfire_grace_time=None
        )

    async def cog_unload(self) -> None:  # also when the bot closes
        self.bot.remove_dynamic_items(VoteButton)
        if self.bot.maintenance.scheduler.get_job("vote_rounds") is not None:
            self.bot.maintenance.scheduler.remove_job("vote_rounds")

    # --- the round's message

    async def refresh(self, round_id: int) -> None:
        """Post or edit the round's message with its current proposals and votes; a finished
        round's message shows the outcome without buttons, and is then marked shown."""
        async with self._locks.setdefault(round_id, asyncio.Lock()):
            async with self.bot.db.sessions() as s:
                v = await votes.view(s, round_id)
                gs = await game_sessions.session_by_id(s, v.round.session_id)
            rnd = v.round
            embed = round_embed(v, display_film(gs.film_id).title)
            view = view_of(*(VoteButton(o.proposal.id, o.number) for o in v.options)) if rnd.status == "open" else None
            channel = self.bot.board.channel(rnd.channel_id, rnd.guild_id)
            try:
                if rnd.message_id is None:
                    msg = await channel.send(embed=embed, view=view) if view else await channel.send(embed=embed)
                    async with self.bot.db.sessions.begin() as s:
                        await votes.set_message(s, rnd.id, msg.id)
                else:
                    await channel.get_partial_message(rnd.message_id).edit(embed=embed, view=view)
            except (discord.NotFound, discord.Forbidden):
                pass  # the message was deleted, or the bot may not post here: trying again will not help
            except discord.HTTPException as e:
                log.warning("vote round %s: could not update its message: %s", rnd.id, e)
                return
            if rnd.status != "open":
                async with self.bot.db.sessions.begin() as s:
                    await votes.mark_shown(s, rnd.id)
                self._locks.pop(round_id, None)

    # --- closing

    async def tick(self) -> None:
        """Close the due rounds of this bot's guilds and show every result not shown yet."""
        async with self._tick_lock:
            guild_ids = [g.id for g in self.bot.guilds]
            if not guild_ids:
                return
            try:
                async with self.bot.db.sessions() as s:
                    due = await votes.due_rounds(s, guild_ids)
            except Exception as e:
                log.warning("looking for due vote rounds failed: %s", e)
                return
            for round_id in due:
                try:
                    async with self.bot.db.sessions.begin() as s:
                        closed = await votes.close_round(s, round_id, self.bot.settings, self.bot.queue.enqueue)
                        turn = position = None
                        if closed is not None and closed.turn_id is not None:
                            turn = await turn_service.get_turn(s, closed.turn_id)
                            position = None if turn is None else await self.bot.queue.position(s, turn)
                except Exception as e:  # the round stays open; the next check tries again
                    log.warning("closing vote round %s failed: %s", round_id, e)
                    continue
                if turn is not None:
                    await self.bot.board.announce_queued(turn, position)
            try:
                async with self.bot.db.sessions() as s:
                    unshown = await votes.unshown(s, guild_ids)
            except Exception as e:
                log.warning("looking for vote results to show failed: %s", e)
                return
            for rnd in unshown:
                await self.refresh(rnd.id)

    # --- commands

    @vote.command(name="propose", description="Propose the next turn's action; the round's vote decides")
    @act_fields(others="Characters in the shot besides yours, separated by commas (name one if you play none)")
    async def propose(
        self,
        interaction: discord.Interaction,
        motion: app_commands.Range[str, 1, 100],
        background: app_commands.Range[str, 1, 100],
        adverb: app_commands.Range[str, 0, 100] | None = None,
        time_of_day: app_commands.Range[str, 0, 100] | None = None,
        others: app_commands.Range[str, 0, 200] | None = None,
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        automod = await self.bot.automod.for_interaction(interaction)  # read before the transaction
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction), active=True)
            film = session_film(gs.film_id)
            cfg = await guilds.channel_config(s, self.bot.settings, context.guild_id(interaction), context.channel_id(interaction))
            me = await game_sessions.player_of(s, gs.id, interaction.user.id)
            names = votes.shot_characters(me.character_id if me else None, split_names(others))
            ins = cfg.instruction(film, names, motion, background, adverb or "", time_of_day or "", extra_rules=automod)
            rnd, number, _ = await votes.propose(
                s, gs, author_id=interaction.user.id, author_name=cfg.shown_name(interaction.user.display_name, automod),
                instruction=ins,
            )
        await self.refresh(rnd.id)
        text = with_cleaning_notes(f"Your proposal is option {number}: {esc(ins.text)}", ins)
        await interaction.followup.send(text, ephemeral=True)

    @vote.command(name="open", description="Open a vote round now (the first proposal also opens one)")
    async def open_now(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self.bot.db.sessions.begin() as s:
            gs = await game_sessions.require_session(s, context.channel_id(interaction), active=True)
            rnd, created = await votes.open_round(s, gs, by=interaction.user.id)
        await self.refresh(rnd.id)
        text = "A vote round is open: propose with /vote propose." if created else "A round is already open: vote on its message."
        await interaction.followup.send(text, ephemeral=True)

    @vote.command(name="mode", description="Admins: play this channel by vote, or back to /act", extras={"rights": "admin"})
    @app_commands.describe(enabled="Vote mode on or off", seconds="How long a round stays open (default 120)")
    @checks.rights("admin")
    async def mode(
        self, interaction: discord.Interaction, enabled: bool,
        seconds: app_commands.Range[int, votes.MIN_ROUND_SECONDS, votes.MAX_ROUND_SECONDS] | None = None,
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        async with self.bot.db.sessions.begin() as s:
            cfg, voided = await votes.set_mode(s, context.guild_id(interaction), context.channel_id(interaction), enabled, seconds)
            await bot_audit.record(s, interaction, "vote_mode", "on" if enabled else "off", round_seconds=cfg.round_seconds)
        for rnd in voided:
            await self.refresh(rnd.id)
        if enabled:
            public = (f"{esc(interaction.user.display_name)} turned on vote mode: propose actions with /vote propose, "
                      f"vote on the round's message; each round lasts {cfg.round_seconds} s.")
            private = f"Vote mode is on ({cfg.round_seconds} s rounds)."
        else:
            public = f"{esc(interaction.user.display_name)} turned off vote mode: players act with /act again."
            private = "Vote mode is off."
        await self.bot.board.channel(context.channel_id(interaction), context.guild_id(interaction)).send(public)
        await interaction.followup.send(private, ephemeral=True)


async def setup(bot: AnimeGamerBot) -> None:
    await bot.add_cog(Vote(bot))
