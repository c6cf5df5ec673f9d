"""Channels and messages: what the bot posts, edits and deletes, the attachments it uploads, the
MESSAGE_* gateway events, and the test-facing helpers to seed, find and count them."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from testkit.waits import loop_turns

from .errors import ApiError, FakeDiscordTimeout, invalid_form, unknown
from .gateway import INTENT_GUILD_MESSAGES, INTENT_MESSAGE_CONTENT, GatewaySession
from .guilds import FakeMember
from .models import (
    ATTACH_FILES,
    FLAG_EPHEMERAL,
    FLAG_LOADING,
    MANAGE_MESSAGES,
    SEND_MESSAGES,
    VIEW_CHANNEL,
    FakeAttachment,
    FakeChannel,
    FakeMessage,
    FakeUser,
    iso_now,
)
from .rest import Reply, route

if TYPE_CHECKING:  # pragma: no cover
    from .interactions import InteractionHandle
    from .models import RecordedRequest
    from .server import FakeDiscord

ChannelRef = FakeChannel | int
MESSAGE = "/channels/{channel_id}/messages/{message_id}"


class MessagesMixin:
    """FakeDiscord's channels and messages."""

    # -- seeding and inspecting (test-facing) ------------------------------------------------------

    def channel(self: FakeDiscord, channel_id: int) -> FakeChannel:
        return self._channels[int(channel_id)]

    def post_message(
        self: FakeDiscord,
        channel: FakeChannel,
        *,
        author: FakeUser | FakeMember | None = None,
        content: str = "",
        embeds: list[dict[str, Any]] | None = None,
        components: list[dict[str, Any]] | None = None,
        dispatch: bool = False,
        source: str = "seeded",
    ) -> FakeMessage:
        """Seed a message without going through the client, e.g. one the bot posted before a restart.

        author defaults to the bot. With dispatch=True a connected client gets MESSAGE_CREATE.
        """
        msg = FakeMessage(
            id=self.snowflake(),
            channel_id=channel.id,
            guild_id=channel.guild_id,
            author=author.user if isinstance(author, FakeMember) else (author or self.bot_user),
            content=content,
            embeds=embeds or [],
            components=components or [],
            source=source,
        )
        self._store_message(msg, channel, dispatch=dispatch)
        return msg

    async def user_message(
        self: FakeDiscord, channel: FakeChannel, member: FakeMember, content: str
    ) -> FakeMessage:
        """A human posts in a channel: stored, and MESSAGE_CREATE is dispatched (content intent honoured)."""
        msg = self.post_message(channel, author=member, content=content, dispatch=True, source="user")
        await loop_turns()  # the dispatch's send gets its turn of the loop
        return msg

    def channel_messages(
        self: FakeDiscord, channel: ChannelRef, *, include_ephemeral: bool = False
    ) -> list[FakeMessage]:
        """Messages in a channel, oldest first, without deleted ones."""
        cid = getattr(channel, "id", channel)
        return [
            m
            for m in self.messages.values()
            if m.channel_id == cid and not m.deleted and (include_ephemeral or not m.ephemeral)
        ]

    def channel_edits(
        self: FakeDiscord, channel: ChannelRef, *, via: str | None = "channel"
    ) -> list[tuple[float, FakeMessage]]:
        """(time.monotonic() of the edit, message) for every edit of a message in channel, oldest first.

        via: "channel" (PATCH /channels/.../messages/..., the route Discord's per-channel edit
        limit counts), "webhook" (interaction token edits), "interaction_update" (type 7) or None (all).
        """
        cid = getattr(channel, "id", channel)
        edits = [
            (e["at"], m)
            for m in self.messages.values()
            if m.channel_id == cid
            for e in m.edits
            if via is None or e["via"] == via
        ]
        return sorted(edits, key=lambda pair: pair[0])

    def max_edits_in_window(
        self: FakeDiscord, channel: ChannelRef, window: float = 5.0, *, via: str | None = "channel"
    ) -> int:
        """The most edits in channel within any `window` seconds (sliding), e.g. to hold the bot to
        Discord's budget of 5 message edits per 5 s per channel."""
        times = [at for at, _ in self.channel_edits(channel, via=via)]
        most, first = 0, 0
        for last, at in enumerate(times):
            while at - times[first] >= window:
                first += 1
            most = max(most, last - first + 1)
        return most

    # -- waiting (test-facing) ---------------------------------------------------------------------

    async def wait_for_message(
        self: FakeDiscord,
        channel: ChannelRef | None = None,
        predicate: Callable[[FakeMessage], bool] | None = None,
        *,
        timeout: float = 5.0,
        after: FakeMessage | int | None = None,
        include_ephemeral: bool = False,
        author: FakeUser | FakeMember | None = None,
    ) -> FakeMessage:
        """First stored message (existing or future) in channel matching predicate.

        `after` (a message or id) skips older messages; author defaults to the bot.
        """
        cid = getattr(channel, "id", channel)
        after_id = int(getattr(after, "id", after or 0))
        author_id = (author or self.bot_user).id
        pred = predicate or (lambda m: True)

        def find() -> FakeMessage | None:
            for m in self.messages.values():
                if (
                    (cid is None or m.channel_id == cid)
                    and m.id > after_id
                    and m.author.id == author_id
                    and not m.deleted
                    and (include_ephemeral or not m.ephemeral)
                    and pred(m)
                ):
                    return m
            return None

        try:
            return await self.wait_until(find, timeout, "a matching message")
        except FakeDiscordTimeout:
            pool = self.channel_messages(cid, include_ephemeral=True) if cid else list(self.messages.values())
            raise FakeDiscordTimeout(
                f"timed out after {timeout}s waiting for a message in channel {cid}; recent: {pool[-5:]}"
            ) from None

    async def wait_for_edits(
        self: FakeDiscord, message: FakeMessage | int, count: int, *, timeout: float = 5.0
    ) -> FakeMessage:
        """Wait until a message has been edited at least `count` times."""
        mid = int(getattr(message, "id", message))
        await self.wait_until(
            lambda: mid in self.messages and self.messages[mid].edit_count >= count,
            timeout,
            f"{count} edits of message {mid} (now {self.messages.get(mid)})",
        )
        return self.messages[mid]

    # -- storing, editing, deleting ----------------------------------------------------------------

    def _new_message(
        self: FakeDiscord,
        channel: FakeChannel,
        body: dict[str, Any],
        files: list[FakeAttachment],
        *,
        source: str,
        extra_flags: int = 0,
        allow_empty: bool = False,
        interaction: InteractionHandle | None = None,
    ) -> FakeMessage:
        attachments = self._attachments_from(channel.id, body, files, [])
        content = body.get("content") or ""
        embeds = body.get("embeds") or ([body["embed"]] if body.get("embed") else [])
        components = body.get("components") or []
        has_body = content or embeds or attachments or components or body.get("sticker_ids") or body.get("poll")
        if not allow_empty and not has_body:
            raise ApiError(400, 50006, "Cannot send an empty message")
        if len(content) > 2000:
            raise invalid_form("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
        if len(embeds) > 10:
            raise invalid_form("embeds", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
        msg = FakeMessage(
            id=self.snowflake(),
            channel_id=channel.id,
            guild_id=channel.guild_id,
            author=self.bot_user,
            content=content,
            embeds=embeds,
            components=components,
            attachments=attachments,
            flags=int(body.get("flags") or 0) | extra_flags,
            tts=bool(body.get("tts")),
            message_reference=body.get("message_reference"),
            source=source,
        )
        if msg.message_reference:
            msg.type = 19  # reply
        if interaction is not None:
            interaction.tie(msg, followup=source == "followup")
        self._store_message(msg, channel, dispatch=True)
        return msg

    def _parse_mentions(self: FakeDiscord, msg: FakeMessage) -> None:
        user_ids = [int(i) for i in re.findall(r"<@!?(\d+)>", msg.content)]
        msg.mentions = [self.users[i] for i in dict.fromkeys(user_ids) if i in self.users]
        msg.mention_roles = list(dict.fromkeys(int(i) for i in re.findall(r"<@&(\d+)>", msg.content)))

    def _store_message(self: FakeDiscord, msg: FakeMessage, channel: FakeChannel, *, dispatch: bool) -> None:
        self._parse_mentions(msg)
        self.messages[msg.id] = msg
        if not msg.ephemeral:
            channel.last_message_id = msg.id
        if dispatch and not msg.ephemeral:
            self._dispatch_message_event("MESSAGE_CREATE", msg)
        self._notify()

    def _edit_message(
        self: FakeDiscord, msg: FakeMessage, body: dict[str, Any], files: list[FakeAttachment], *, via: str
    ) -> None:
        attachments = msg.attachments
        if files or "attachments" in body:  # checked first: a refused edit changes nothing
            attachments = self._attachments_from(msg.channel_id, body, files, msg.attachments)
        if "content" in body:
            msg.content = body["content"] or ""
            self._parse_mentions(msg)
        if "embeds" in body:
            msg.embeds = body["embeds"] or []
        elif "embed" in body:
            msg.embeds = [body["embed"]] if body["embed"] else []
        if "components" in body:
            msg.components = body["components"] or []
        if "flags" in body and body["flags"] is not None:
            # Only SUPPRESS_EMBEDS (and friends) can change; ephemeral is fixed at creation.
            msg.flags = (int(body["flags"]) & ~FLAG_EPHEMERAL) | (msg.flags & FLAG_EPHEMERAL)
        msg.attachments = attachments
        msg.flags &= ~FLAG_LOADING  # editing a deferred response replaces the "thinking" placeholder
        msg.edited_timestamp = iso_now()
        msg.edits.append({"via": via, "body": body, "files": [f.filename for f in files], "at": time.monotonic()})
        if not msg.ephemeral:
            self._dispatch_message_event("MESSAGE_UPDATE", msg)
        self._notify()

    def _delete_message(self: FakeDiscord, msg: FakeMessage) -> None:
        msg.deleted = True
        if not msg.ephemeral:
            data = {"id": str(msg.id), "channel_id": str(msg.channel_id), "guild_id": str(msg.guild_id)}
            self._dispatch_to_message_sessions(lambda session: data, "MESSAGE_DELETE")
        self._notify()

    def _dispatch_message_event(self: FakeDiscord, event: str, msg: FakeMessage) -> None:
        guild = self.guilds[msg.guild_id]

        def build(session: GatewaySession) -> dict[str, Any]:
            data = msg.payload()
            data["guild_id"] = str(guild.id)
            member = guild.members.get(msg.author.id)
            if member is not None:
                data["member"] = member.payload(with_user=False)
            # Without MESSAGE_CONTENT, other users' messages arrive without content (unless the bot is mentioned).
            if (
                msg.author.id != self.bot_user.id
                and not session.wants(INTENT_MESSAGE_CONTENT)
                and self.bot_user not in msg.mentions
            ):
                data.update(content="", embeds=[], attachments=[], components=[])
            return data

        self._dispatch_to_message_sessions(build, event)

    def _dispatch_to_message_sessions(
        self: FakeDiscord, build: Callable[[GatewaySession], dict[str, Any]], event: str
    ) -> None:
        for session in self.gateway.live_sessions():
            if session.wants(INTENT_GUILD_MESSAGES):
                session.dispatch(event, build(session))

    # -- lookups raising Discord's errors ----------------------------------------------------------

    def _channel_or_404(self: FakeDiscord, channel_id: str) -> FakeChannel:
        channel = self._channels.get(int(channel_id)) if channel_id.isdigit() else None
        if channel is None:
            raise unknown("Channel", 10003)
        return channel

    def _message_or_404(self: FakeDiscord, channel: FakeChannel, message_id: str) -> FakeMessage:
        msg = self.messages.get(int(message_id)) if message_id.isdigit() else None
        if msg is None or msg.deleted or msg.channel_id != channel.id or msg.ephemeral:
            raise unknown("Message", 10008)
        return msg

    def _require(self: FakeDiscord, channel: FakeChannel, bits: int) -> None:
        """The bot's permissions in channel must include VIEW_CHANNEL and bits."""
        guild = self.guilds[channel.guild_id]
        perms = guild.permissions_in(guild.me, channel)
        if not perms & VIEW_CHANNEL:
            raise ApiError(403, 50001, "Missing Access")
        if perms & bits != bits:
            raise ApiError(403, 50013, "Missing Permissions")

    # -- REST handlers -----------------------------------------------------------------------------

    @route("GET", "/channels/{channel_id}")
    async def _get_channel(self: FakeDiscord, rec: RecordedRequest, channel_id: str) -> Reply:
        channel = self._channel_or_404(channel_id)
        self._require(channel, 0)
        return 200, channel.payload()

    @route("GET", "/channels/{channel_id}/messages")
    async def _list_messages(self: FakeDiscord, rec: RecordedRequest, channel_id: str) -> Reply:
        """Channel history (the bot looks for a post whose recording was lost): before/after/limit."""
        channel = self._channel_or_404(channel_id)
        self._require(channel, 0)
        msgs, q = self.channel_messages(channel), rec.query
        if "before" in q:
            msgs = [m for m in msgs if m.id < int(q["before"])]
        if "after" in q:
            msgs = [m for m in msgs if m.id > int(q["after"])]
        limit = int(q.get("limit", 50))
        msgs = msgs[:limit] if "after" in q else msgs[-limit:]
        return 200, [m.payload() for m in reversed(msgs)]  # newest first, like Discord

    @route("POST", "/channels/{channel_id}/messages")
    async def _create_message(self: FakeDiscord, rec: RecordedRequest, channel_id: str) -> Reply:
        channel = self._channel_or_404(channel_id)
        self._require(channel, SEND_MESSAGES | (ATTACH_FILES if rec.files else 0))
        self._check_upload(rec.files, channel)
        body = rec.json or {}
        if int(body.get("flags") or 0) & FLAG_EPHEMERAL:
            raise invalid_form("flags", "MESSAGE_FLAGS_INVALID", "Ephemeral messages need an interaction")
        # With enforce_nonce, Discord answers a repeated nonce with the message it created first.
        nonce = str(body["nonce"]) if body.get("nonce") is not None and body.get("enforce_nonce") else None
        earlier = self._nonces.get(nonce) if nonce is not None else None
        if earlier is not None and not earlier.deleted:
            return 200, earlier.payload()
        msg = self._new_message(channel, body, rec.files, source="channel")
        if nonce is not None:
            self._nonces[nonce] = msg
        return 200, msg.payload()

    @route("GET", MESSAGE)
    async def _get_message(self: FakeDiscord, rec: RecordedRequest, channel_id: str, message_id: str) -> Reply:
        channel = self._channel_or_404(channel_id)
        self._require(channel, 0)
        return 200, self._message_or_404(channel, message_id).payload()

    @route("PATCH", MESSAGE)
    async def _patch_message(self: FakeDiscord, rec: RecordedRequest, channel_id: str, message_id: str) -> Reply:
        channel = self._channel_or_404(channel_id)
        msg = self._message_or_404(channel, message_id)
        if msg.author.id != self.bot_user.id:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        self._check_upload(rec.files, channel)
        self._edit_message(msg, rec.json or {}, rec.files, via="channel")
        return 200, msg.payload()

    @route("DELETE", MESSAGE)
    async def _delete_message_route(
        self: FakeDiscord, rec: RecordedRequest, channel_id: str, message_id: str
    ) -> Reply:
        channel = self._channel_or_404(channel_id)
        msg = self._message_or_404(channel, message_id)
        if msg.author.id != self.bot_user.id:
            self._require(channel, MANAGE_MESSAGES)
        self._delete_message(msg)
        return 204, None
