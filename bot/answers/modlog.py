"""The moderation log channel (/admin log-channel): every audit entry of a server is posted there
as an embed: admin and moderator actions, refused instructions, removed and reported shots.

One hook: recording an audit entry sends a NOTIFY in its transaction, so whatever is audited, by
any process, reaches the log at commit, and nothing rolled back does (service.modlog). The bot
LISTENs on its own connection, reads the entry and its server's log channel, and
posts in the background: a player's turn never waits for the log. Sends go through a per-channel
budget (one at a time, at most `limit` in any `per` seconds, at most `backlog` waiting: older
entries beyond that are dropped with a warning); a failure is logged, never raised. An entry
recorded while the LISTEN connection is down is not posted (it stays in /admin show).
The log channel is public: an entry is written in its server's language (bot.parts.locale.public).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import TYPE_CHECKING

import discord

from bot.parts import audit as bot_audit
from bot.parts import locale
from bot.parts.audit import rule_set_text, title_of, turn_text, user_text
from bot.parts.edits import post_channel
from bot.parts.embeds import esc, fit, fit_embed
from bot.parts.service_args import deps_of
from game.shot_errors import LogChannelUnusable
from i18n import _
from i18n.translate import Lp_
from service import events, modlog
from service.modlog import AuditEntry

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

log = logging.getLogger(__name__)

REFUSED = "instruction_refused"  # recorded by the content rules (bot.answers.replies.record_refusal)


def jump_url(guild_id: int, channel_id: object, message_id: object) -> str | None:
    if not (str(channel_id or "").isdigit() and str(message_id or "").isdigit()):
        return None
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


def _first(details: dict, *keys: str) -> str | None:
    for k in keys:
        v = details.get(k)
        if v not in (None, "", [], {}):
            return ", ".join(map(str, v)) if isinstance(v, list) else str(v)
    return None


def log_embed(entry: AuditEntry) -> discord.Embed:
    """One audit entry as the log channel shows it, in the current language (the server's: see
    ModLog._read), within Discord's embed limits (6,000 characters in all: a 2,500-character
    description, fields of at most 1,000)."""
    d = entry.details
    title, colour = title_of(entry.action)
    e = discord.Embed(title=title, description=fit(bot_audit.describe(entry), 2500), colour=colour)
    if entry.action in ("remove_shot", "report_shot"):
        url = jump_url(entry.guild_id, d.get("game_channel_id"), d.get("message_id"))
        shot = turn_text(entry.target) if entry.target else _("the shot")
        e.add_field(name=_("Shot"), value=f"[{shot}]({url})" if url else shot, inline=True)
        if d.get("author") is not None:
            e.add_field(name=_("Its author"), value=user_text(d.get("author_id"), d.get("author")), inline=True)
        if d.get("reason"):
            e.add_field(name=_("Reason"), value=fit(esc(str(d["reason"])), 1000), inline=False)
    elif entry.action == REFUSED:
        e.add_field(name=_("Member"), value=user_text(entry.actor_id, entry.actor_name), inline=True)
        rules = _first(d, "rule_set", "rules", "rule", "ruleset")
        e.add_field(name=_("Rule set"), value=fit(rule_set_text(rules, d.get("rule")) if rules else _("unknown"), 1000), inline=True)
        if d.get("term"):
            e.add_field(name=_("Matched"), value=f"||{esc(str(d['term'])[:300])}||", inline=True)
        text = _first(d, "text", "instruction", "input")
        if text:
            e.add_field(name=_("Text"), value=f"||{esc(text[:450])}||", inline=False)
    e.set_footer(text=_("audit #%(id)s", id=entry.id))
    if entry.created_at is not None:
        e.timestamp = entry.created_at
    return fit_embed(e)


# The permissions a log channel needs, named as Discord's client names them.
LOG_NEEDS = (("view_channel", Lp_("permission", "View Channel")), ("send_messages", Lp_("permission", "Send Messages")),
             ("embed_links", Lp_("permission", "Embed Links")))


def require_postable(interaction: discord.Interaction, channel: discord.TextChannel) -> None:
    """Refuses (LogChannelUnusable) a channel the bot cannot post embeds in, naming what is missing."""
    me = channel.guild.me
    if me is None:  # not in the cache: Discord's answer to the first post will tell
        return
    perms = channel.permissions_for(me)
    missing = [str(label) for flag, label in LOG_NEEDS if not getattr(perms, flag)]
    if missing:
        raise LogChannelUnusable(f"<#{channel.id}>", missing)


class _Outbox:
    def __init__(self, limit: int, backlog: int) -> None:
        self.pending: collections.deque[discord.Embed] = collections.deque(maxlen=backlog)
        self.done_at: collections.deque[float] = collections.deque(maxlen=limit)
        self.task: asyncio.Task | None = None


class ModLog:
    def __init__(self, bot: AnimeGamerBot, *, limit: int = 5, per: float = 5.0, backlog: int = 100) -> None:
        self.bot = bot
        self.limit, self.per, self.backlog = limit, per, backlog
        self._outboxes: dict[int, _Outbox] = {}
        self._entries: asyncio.Queue[int] = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []
        self.listening = asyncio.Event()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._listen(), name="modlog-listen"),
                       asyncio.create_task(self._read(), name="modlog-read")]

    async def close(self) -> None:
        tasks = self._tasks + [o.task for o in self._outboxes.values() if o.task is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    async def _listen(self) -> None:
        async def connected() -> None:
            self.listening.set()

        while True:
            try:
                async with events.Events(self.bot.db.url, [events.AUDIT_RECORDED], on_connect=connected) as heard:
                    async for event in heard:
                        self.heard(event.payload)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the listener reconnects by itself; this is the unexpected rest
                log.warning("moderation log cannot LISTEN (%s); retrying", e)
                await asyncio.sleep(5)

    def heard(self, payload: dict) -> None:
        """An audit entry was committed: post it if its server is one of this bot's."""
        try:
            guild_id, audit_id = int(payload["guild_id"]), int(payload["audit_id"])
        except (KeyError, TypeError, ValueError):
            return
        if self.bot.get_guild(guild_id) is not None:
            self._entries.put_nowait(audit_id)

    async def _read(self) -> None:
        """Entries in the order they were heard, each routed to its server's log channel."""
        while True:
            audit_id = await self._entries.get()
            try:
                found = await modlog.to_post(deps_of(self.bot), audit_id)
                if found is not None:
                    entry, channel_id = found
                    async with locale.public(self.bot, entry.guild_id, channel_id):
                        embed = log_embed(entry)
                    self.send(channel_id, entry.guild_id, embed)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("moderation log: audit entry %s not posted: %s", audit_id, e)

    def send(self, channel_id: int, guild_id: int, embed: discord.Embed) -> None:
        """Post in the background, within the channel's budget."""
        box = self._outboxes.get(channel_id)
        if box is None:
            box = self._outboxes[channel_id] = _Outbox(self.limit, self.backlog)
        if len(box.pending) == self.backlog:
            log.warning("moderation log %s: %d entries waiting; the oldest is dropped", channel_id, self.backlog)
        box.pending.append(embed)
        if box.task is None or box.task.done():
            box.task = asyncio.create_task(self._drain(channel_id, guild_id, box), name=f"modlog-{channel_id}")

    async def _drain(self, channel_id: int, guild_id: int, box: _Outbox) -> None:
        gap = self.per / self.limit
        while box.pending:
            now = time.monotonic()
            wait = (box.done_at[-1] + gap - now) if box.done_at else 0.0
            if len(box.done_at) == self.limit:
                wait = max(wait, box.done_at[0] + self.per - now)
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            embed = box.pending.popleft()
            try:
                await post_channel(self.bot, channel_id, guild_id).send(embed=embed)
            except (discord.HTTPException, OSError, TimeoutError) as e:  # logged, never raised
                log.warning("moderation log %s: could not post (%s)", channel_id, e)
            finally:
                box.done_at.append(time.monotonic())
