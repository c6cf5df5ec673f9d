"""FakeDiscord: an aiohttp server that plays Discord's REST API v10 and gateway on 127.0.0.1.

See the package docstring (tests/fake_discord/__init__.py) for how tests use it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
import re
import socket
import time
import urllib.parse
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Tuple, Union

from aiohttp import web

from . import interactions as it
from .gateway import (
    INTENT_DIRECT_MESSAGES,
    INTENT_GUILD_MESSAGES,
    INTENT_MESSAGE_CONTENT,
    Gateway,
    GatewaySession,
)
from .interactions import InteractionCallback, InteractionHandle, infer_option_type
from .models import (
    ALL_PERMISSIONS as ALL,
    ATTACH_FILES,
    DEFAULT_BOT_PERMISSIONS,
    DEFAULT_EVERYONE_PERMISSIONS,
    DEFAULT_UPLOAD_LIMIT,
    DM,
    FLAG_EPHEMERAL,
    FLAG_LOADING,
    MANAGE_MESSAGES,
    MANAGE_ROLES,
    SEND_MESSAGES,
    VIEW_CHANNEL,
    FakeAttachment,
    FakeChannel,
    FakeGuild,
    FakeMember,
    FakeMessage,
    FakeRole,
    FakeUser,
    RecordedRequest,
    SnowflakeGenerator,
    as_int,
    compile_route,
    iso_now,
    next_token,
)

log = logging.getLogger(__name__)

Reply = Tuple[int, Any]  # (HTTP status, JSON body or None)
Handler = Callable[..., Awaitable[Reply]]


class ApiError(Exception):
    """An error answer with Discord's JSON error body {"message", "code"[, "errors"]}."""

    def __init__(self, status: int, code: int, message: str, errors: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status = status
        self.body: Dict[str, Any] = {"message": message, "code": code}
        if errors:
            self.body["errors"] = errors


def invalid_form(field: str, code: str, message: str) -> ApiError:
    """Discord's 400 "Invalid Form Body" (50035) with one nested field error."""
    errors: Dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for part in reversed(field.split(".")) if field else ():
        errors = {part: errors}
    return ApiError(400, 50035, "Invalid Form Body", errors)


def _unknown(what: str, code: int) -> ApiError:
    return ApiError(404, code, f"Unknown {what}")


def _find_chat_command(commands: List[Dict[str, Any]], name: str) -> Optional[Dict[str, Any]]:
    return next((c for c in commands if c["name"] == name and c.get("type", 1) == 1), None)


def _check_option_limits(opt_def: Dict[str, Any], value: Any) -> None:
    """The Discord client refuses to send values outside an option's declared limits."""
    name = opt_def["name"]
    if opt_def.get("choices") and value not in [c["value"] for c in opt_def["choices"]]:
        raise ValueError(f"{name}={value!r} is not one of the choices {opt_def['choices']}")
    if opt_def["type"] in (it.INTEGER, it.NUMBER):
        low, high = opt_def.get("min_value"), opt_def.get("max_value")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"{name}={value!r} is outside [{low}, {high}]")
    if opt_def["type"] == it.STRING:
        low, high = opt_def.get("min_length"), opt_def.get("max_length")
        if (low is not None and len(value) < low) or (high is not None and len(value) > high):
            raise ValueError(f"{name}={value!r} length is outside [{low}, {high}]")


class FakeDiscordTimeout(AssertionError):
    """A wait_* helper timed out; the message says what was awaited and what the fake holds."""


class _Route:
    def __init__(self, method: str, template: str, handler: Handler, auth: bool) -> None:
        self.method = method
        self.template = template
        self.pattern = compile_route(template)
        self.handler = handler
        self.auth = auth


class FakeDiscord:
    """A fake Discord (REST API v10 + gateway) for running the real discord.py client in tests.

    Use as ``async with FakeDiscord() as server:`` or call ``await start()`` / ``await stop()``.
    """

    def __init__(
        self,
        *,
        token: str = "fake-bot-token",
        bot_name: str = "AnimeGamer",
        heartbeat_interval_ms: int = 41250,
        gateway_compression: bool = False,
        default_upload_limit: int = DEFAULT_UPLOAD_LIMIT,
        application_flags: int = 1 << 23,
        interaction_ack_timeout: Optional[float] = None,
    ) -> None:
        self.token = token
        self.snowflake = SnowflakeGenerator()
        self.application_id = self.snowflake()
        # Modern bot users share the application's id.
        self.bot_user = FakeUser(id=self.application_id, username=bot_name, bot=True)
        self.app_owner = FakeUser(id=self.snowflake(), username="app-owner")
        self.application_flags = application_flags
        self.default_upload_limit = default_upload_limit

        self.users: Dict[int, FakeUser] = {self.bot_user.id: self.bot_user, self.app_owner.id: self.app_owner}
        self.guilds: Dict[int, FakeGuild] = {}
        self._channels: Dict[int, FakeChannel] = {}
        self.messages: Dict[int, FakeMessage] = {}
        # (author id, nonce) -> message, for `enforce_nonce` (Discord answers a repeated nonce
        # from the same author with the message it created the first time).
        self._nonces: Dict[tuple, FakeMessage] = {}
        self.attachments: Dict[int, FakeAttachment] = {}
        self.global_commands: List[Dict[str, Any]] = []
        self.guild_commands: Dict[int, List[Dict[str, Any]]] = {}
        self.interactions: Dict[int, InteractionHandle] = {}
        self.requests: List[RecordedRequest] = []
        self.unhandled: List[RecordedRequest] = []  # requests to routes the fake does not know
        self.presence_updates: List[Dict[str, Any]] = []
        self._failures: List[Dict[str, Any]] = []
        # Discord rejects initial callbacks after 3 s with 10062. Off (None) by default so a loaded
        # CI machine cannot make tests flaky; set 3.0 to hold the bot to it (delay is recorded anyway).
        self.interaction_ack_timeout = interaction_ack_timeout
        # How long slash()/click()/... wait for a gateway connection (e.g. a resume in flight).
        self.session_wait = 2.0

        self.gateway = Gateway(self, heartbeat_interval_ms=heartbeat_interval_ms, compression=gateway_compression)
        self._changed = asyncio.Event()
        self._runner: Optional[web.AppRunner] = None
        self.port: int = 0
        self._routes = self._build_routes()

    # ------------------------------------------------------------------------------------------
    # lifecycle and URLs

    async def start(self) -> "FakeDiscord":
        app = web.Application(client_max_size=1024**3)
        app.router.add_get("/", self.gateway.handle)  # the gateway lives at the root, like wss://gateway.discord.gg/
        app.router.add_route("*", "/api/v{version:\\d+}/{tail:.*}", self._api)
        app.router.add_get("/attachments/{channel_id}/{attachment_id}/{filename}", self._cdn)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        return self

    async def stop(self) -> None:
        await self.gateway.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> "FakeDiscord":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """Value for discord.http.Route.BASE."""
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        """Value for DiscordWebSocket.DEFAULT_GATEWAY (as a yarl.URL)."""
        return f"ws://127.0.0.1:{self.port}/"

    # ------------------------------------------------------------------------------------------
    # world building (test-facing)

    def create_user(self, name: str, *, bot: bool = False, global_name: Optional[str] = None) -> FakeUser:
        user = FakeUser(id=self.snowflake(), username=name, bot=bot, global_name=global_name)
        self.users[user.id] = user
        return user

    def create_guild(
        self,
        name: str = "Test Guild",
        *,
        owner: Optional[FakeUser] = None,
        upload_limit: Optional[int] = None,
        everyone_permissions: Any = DEFAULT_EVERYONE_PERMISSIONS,
        bot_permissions: Any = DEFAULT_BOT_PERMISSIONS,
        locale: str = "en-US",
    ) -> FakeGuild:
        """A guild with @everyone, the bot (with a managed role) and an owner member.

        Created after a client connected, it reaches the client as GUILD_CREATE ("bot joined").
        """
        owner = owner or self.create_user(f"{name.lower().replace(' ', '-')}-owner")
        guild = FakeGuild(
            id=self.snowflake(),
            name=name,
            owner_id=owner.id,
            upload_limit=self.default_upload_limit if upload_limit is None else upload_limit,
            locale=locale,
            _server=self,
        )
        guild.roles[guild.id] = FakeRole(
            id=guild.id, guild_id=guild.id, name="@everyone", permissions=as_int(everyone_permissions)
        )
        bot_role = FakeRole(
            id=self.snowflake(),
            guild_id=guild.id,
            name=self.bot_user.username,
            permissions=as_int(bot_permissions),
            position=1,
            managed=True,
            bot_id=self.bot_user.id,
        )
        guild.roles[bot_role.id] = bot_role
        guild.add_member(self.bot_user, roles=[bot_role])
        guild.add_member(owner)
        self.guilds[guild.id] = guild
        for session in self.gateway.live_sessions():
            session.dispatch("GUILD_CREATE", self.guild_create_payload(guild, session))
        return guild

    def make_attachment(self, filename: str, data: bytes, *, content_type: Optional[str] = None) -> FakeAttachment:
        """An uploaded file for an attachment option; its URL is served by the fake (Attachment.read works)."""
        return self._store_attachment(0, filename, data, content_type)

    def post_message(
        self,
        channel: FakeChannel,
        *,
        author: Optional[Union[FakeUser, FakeMember]] = None,
        content: str = "",
        embeds: Optional[List[Dict[str, Any]]] = None,
        components: Optional[List[Dict[str, Any]]] = None,
        dispatch: bool = False,
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
            source="seeded",
        )
        self._store_message(msg, channel, dispatch=dispatch)
        return msg

    async def user_message(
        self, channel: FakeChannel, member: Union[FakeMember, FakeUser], content: str
    ) -> FakeMessage:
        """A human posts in a channel: stored, and MESSAGE_CREATE is dispatched (content intent honoured)."""
        user = member.user if isinstance(member, FakeMember) else member
        msg = FakeMessage(
            id=self.snowflake(),
            channel_id=channel.id,
            guild_id=channel.guild_id,
            author=user,
            content=content,
            source="user",
        )
        self._store_message(msg, channel, dispatch=True)
        await asyncio.sleep(0)
        return msg

    def dm_channel(self, user: Union[FakeUser, FakeMember]) -> FakeChannel:
        """The bot's DM channel with a user (created on first use, like POST /users/@me/channels)."""
        user = user.user if isinstance(user, FakeMember) else user
        for ch in self._channels.values():
            if ch.type == DM and ch.recipients and ch.recipients[0].id == user.id:
                return ch
        ch = FakeChannel(id=self.snowflake(), guild_id=None, name=None, type=DM, recipients=[user], _server=self)
        self._channels[ch.id] = ch
        return ch

    def channel(self, channel_id: int) -> FakeChannel:
        return self._channels[int(channel_id)]

    # ------------------------------------------------------------------------------------------
    # inspection (test-facing)

    def channel_messages(
        self, channel: Union[FakeChannel, int], *, include_ephemeral: bool = False
    ) -> List[FakeMessage]:
        """Messages in a channel, oldest first, without deleted ones."""
        cid = getattr(channel, "id", channel)
        return [
            m
            for m in self.messages.values()
            if m.channel_id == cid and not m.deleted and (include_ephemeral or not m.ephemeral)
        ]

    def commands(self, guild: Optional[FakeGuild] = None) -> List[Dict[str, Any]]:
        """Application commands as last synced (global, or for one guild)."""
        return self.global_commands if guild is None else self.guild_commands.get(guild.id, [])

    def command(self, name: str, guild: Optional[FakeGuild] = None) -> Dict[str, Any]:
        for cmd in self.commands(guild):
            if cmd["name"] == name:
                return cmd
        raise KeyError(name)

    def requests_to(self, method: str, route: str) -> List[RecordedRequest]:
        """Recorded requests for a route template, e.g. ("POST", "/channels/{channel_id}/messages")."""
        return [r for r in self.requests if r.method == method and r.route == route]

    # ------------------------------------------------------------------------------------------
    # waiting (test-facing)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
        """Wait until predicate() is truthy (re-checked whenever the fake's state changes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = predicate()
            if result:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise FakeDiscordTimeout(f"timed out after {timeout}s waiting for {what}")
            event = self._changed
            try:
                # Short cap: state changed by code that does not call _notify is still noticed.
                await asyncio.wait_for(event.wait(), min(remaining, 0.05))
            except asyncio.TimeoutError:
                pass

    async def wait_for_message(
        self,
        channel: Optional[Union[FakeChannel, int]] = None,
        predicate: Optional[Callable[[FakeMessage], bool]] = None,
        *,
        timeout: float = 5.0,
        after: Optional[Union[FakeMessage, int]] = None,
        include_ephemeral: bool = False,
        author: Optional[Union[FakeUser, FakeMember]] = None,
    ) -> FakeMessage:
        """First stored message (existing or future) in channel matching predicate.

        `after` (a message or id) skips older messages; author defaults to the bot.
        """
        cid = getattr(channel, "id", channel)
        after_id = int(getattr(after, "id", after or 0))
        author_id = (author or self.bot_user).id
        pred = predicate or (lambda m: True)

        def find() -> Optional[FakeMessage]:
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
            recent = pool[-5:]
            raise FakeDiscordTimeout(
                f"timed out after {timeout}s waiting for a message in channel {cid}; recent: {recent}"
            ) from None

    async def wait_for_edits(
        self, message: Union[FakeMessage, int], count: int, *, timeout: float = 5.0
    ) -> FakeMessage:
        """Wait until a message has been edited at least `count` times."""
        mid = int(getattr(message, "id", message))
        await self.wait_until(
            lambda: mid in self.messages and self.messages[mid].edit_count >= count,
            timeout,
            f"{count} edits of message {mid} (now {self.messages.get(mid)})",
        )
        return self.messages[mid]

    async def wait_for_request(
        self,
        method: str,
        route: str,
        predicate: Optional[Callable[[RecordedRequest], bool]] = None,
        *,
        timeout: float = 5.0,
        after: int = 0,
    ) -> RecordedRequest:
        """Wait for a recorded request to a route template (index in self.requests >= after)."""
        pred = predicate or (lambda r: True)

        def find() -> Optional[RecordedRequest]:
            for r in self.requests[after:]:
                if r.method == method and r.route == route and r.status and pred(r):
                    return r
            return None

        return await self.wait_until(find, timeout, f"{method} {route}")

    # ------------------------------------------------------------------------------------------
    # faults and gateway control (test-facing)

    def fail_next(
        self,
        method: str,
        path_regex: str,
        *,
        status: int = 503,
        code: int = 0,
        message: str = "injected",
        times: int = 1,
    ) -> None:
        """Answer the next `times` requests whose path (relative to /api/v10) matches with an error.

        The default 503 makes discord.py raise DiscordServerError at once. Mind its retries: the
        bot's HTTPClient retries 500/502/504/524 and the interaction webhook adapter retries every
        5xx, sleeping 1 s, 3 s, ... in between; 429 is retried after `retry_after` only with a `Via`
        header, which the fake does not send (so a 429 here surfaces as HTTPException at once).
        """
        self._failures.append(
            {
                "method": method.upper(),
                "re": re.compile(path_regex),
                "status": status,
                "code": code,
                "message": message,
                "times": times,
            }
        )

    async def drop_gateway(self, code: int = 4000) -> None:
        """Close the gateway socket(s) with a resumable code; discord.py reconnects and RESUMEs."""
        await self.gateway.drop(code)

    def send_reconnect(self) -> None:
        """Send op 7 RECONNECT; discord.py reconnects and RESUMEs."""
        self.gateway.send_reconnect()

    def invalidate_sessions(self) -> None:
        """Send op 9 (not resumable); discord.py re-IDENTIFYs and gets READY + GUILD_CREATE again."""
        self.gateway.invalidate_sessions()

    async def wait_for_gateway(self, event: str, *, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until the gateway log has `count` entries of kind event ("identify", "resumed", ...)."""
        await self.wait_until(
            lambda: sum(1 for e in self.gateway.log if e[0] == event) >= count,
            timeout,
            f"{count}x gateway {event!r}; log {self.gateway.log}",
        )

    # ------------------------------------------------------------------------------------------
    # interactions (test-facing)

    async def slash(
        self,
        guild: Optional[FakeGuild],
        channel: FakeChannel,
        member: Union[FakeMember, FakeUser],
        command: str,
        options: Optional[Mapping[str, Any]] = None,
        *,
        require_synced: bool = True,
        locale: str = "en-US",
    ) -> InteractionHandle:
        """Invoke a chat-input command, e.g. slash(g, ch, m, "game start", {"title": "x"}).

        Option types come from the synced command definition; with require_synced=False an
        unsynced command is sent with types inferred from the Python values.
        """
        data = self._command_data(guild, command, dict(options or {}), focused=None, require_synced=require_synced)
        return await self._push_interaction(it.APPLICATION_COMMAND, guild, channel, member, data, locale=locale)

    async def autocomplete(
        self,
        guild: Optional[FakeGuild],
        channel: FakeChannel,
        member: Union[FakeMember, FakeUser],
        command: str,
        options: Mapping[str, Any],
        focused: str,
        *,
        require_synced: bool = True,
    ) -> InteractionHandle:
        """Autocomplete request (type 4); `focused` names the option being typed (its value = typed text)."""
        data = self._command_data(guild, command, dict(options), focused=focused, require_synced=require_synced)
        return await self._push_interaction(it.AUTOCOMPLETE, guild, channel, member, data)

    async def click(
        self,
        message: Union[FakeMessage, int],
        member: Union[FakeMember, FakeUser],
        custom_id: str,
        *,
        values: Optional[List[str]] = None,
    ) -> InteractionHandle:
        """Click a button (or choose select values) on a stored message (type 3)."""
        msg = self.messages[int(getattr(message, "id", message))]
        comp = next((c for c in msg.iter_components() if c.get("custom_id") == custom_id), None)
        if comp is None:
            raise ValueError(f"message {msg.id} has no component {custom_id!r}; it has {msg.custom_ids}")
        if msg.deleted:
            raise ValueError(f"message {msg.id} was deleted")
        if comp.get("disabled"):
            raise ValueError(f"component {custom_id!r} is disabled; Discord would not send a click")
        if comp["type"] == 3 and values is not None:
            offered = [o["value"] for o in comp.get("options", [])]
            if not set(values) <= set(offered):
                raise ValueError(f"select {custom_id!r} offers {offered}, not {values}")
        data: Dict[str, Any] = {"custom_id": custom_id, "component_type": comp["type"]}
        if values is not None or comp["type"] in (3, 5, 6, 7, 8):
            data["values"] = list(values or [])
        if "id" in comp:
            data["id"] = comp["id"]
        channel = self._channels[msg.channel_id]
        guild = self.guilds.get(channel.guild_id) if channel.guild_id else None
        return await self._push_interaction(it.MESSAGE_COMPONENT, guild, channel, member, data, message=msg)

    async def select(
        self, message: Union[FakeMessage, int], member: Union[FakeMember, FakeUser], custom_id: str, values: List[str]
    ) -> InteractionHandle:
        """Choose values in a string select menu."""
        return await self.click(message, member, custom_id, values=values)

    async def _modal_submit(
        self,
        parent: InteractionHandle,
        modal: Dict[str, Any],
        values: Dict[str, Any],
        member: Union[FakeMember, FakeUser],
    ) -> InteractionHandle:
        def submitted(comp: Dict[str, Any]) -> Dict[str, Any]:
            if comp["type"] == 1:
                return {"type": 1, "components": [submitted(c) for c in comp.get("components", [])]}
            if comp["type"] == 18:  # label wrapping one component
                return {"type": 18, "component": submitted(comp["component"])}
            out: Dict[str, Any] = {"type": comp["type"]}
            if "custom_id" in comp:
                out["custom_id"] = comp["custom_id"]
                value = values.pop(comp["custom_id"], None)
                if comp["type"] == 4:
                    out["value"] = "" if value is None else str(value)
                else:
                    out["values"] = list(value or [])
            if "id" in comp:
                out["id"] = comp["id"]
            return out

        components = [submitted(c) for c in modal.get("components", []) if c.get("type") in (1, 18)]
        if values:
            raise ValueError(f"modal {modal.get('custom_id')!r} has no inputs {sorted(values)}")
        data = {"custom_id": modal["custom_id"], "components": components}
        guild = self.guilds.get(parent.guild_id) if parent.guild_id else None
        message = self.messages.get(parent.source_message_id) if parent.source_message_id else None
        return await self._push_interaction(it.MODAL_SUBMIT, guild, parent.channel, member, data, message=message)

    # ------------------------------------------------------------------------------------------
    # payload builders used by the gateway

    def bot_user_payload(self) -> Dict[str, Any]:
        data = self.bot_user.payload()
        data.update(verified=True, mfa_enabled=False, flags=0, email=None, locale="en-US")
        return data

    def guild_create_payload(self, guild: FakeGuild, session: GatewaySession) -> Dict[str, Any]:
        return guild.gateway_payload(include_all_members=session.wants(1 << 1))

    def _dispatch_guild_event(
        self, guild_id: Optional[int], event: str, data: Any, intent: Optional[int] = None
    ) -> None:
        if guild_id is None or guild_id not in self.guilds:
            return  # guild still being built, or a DM
        for session in self.gateway.live_sessions():
            if intent is None or session.wants(intent):
                session.dispatch(event, data)
        self._notify()

    # ------------------------------------------------------------------------------------------
    # messages

    def _store_attachment(
        self,
        channel_id: int,
        filename: str,
        data: bytes,
        content_type: Optional[str],
        description: Optional[str] = None,
    ) -> FakeAttachment:
        aid = self.snowflake()
        att = FakeAttachment(
            id=aid,
            filename=filename,
            data=data,
            content_type=content_type,
            description=description,
            url=f"{self.base_url}/attachments/{channel_id}/{aid}/{urllib.parse.quote(filename)}",
        )
        self.attachments[aid] = att
        return att

    def _attachments_from(
        self, channel_id: int, body: Dict[str, Any], files: List[FakeAttachment], existing: List[FakeAttachment]
    ) -> List[FakeAttachment]:
        """Resolve the `attachments` field against uploaded files[n] (new) and kept existing ones."""
        by_index = {i: f for i, f in enumerate(files)}
        meta = body.get("attachments")
        if meta is None:
            new = [self._store_attachment(channel_id, f.filename, f.data, f.content_type) for f in files]
            return existing + new
        keep = {a.id: a for a in existing}
        result: List[FakeAttachment] = []
        for entry in meta:
            aid = int(entry["id"])
            if aid in keep:
                result.append(keep[aid])
            elif aid in by_index:
                f = by_index.pop(aid)
                filename = entry.get("filename") or f.filename
                result.append(
                    self._store_attachment(channel_id, filename, f.data, f.content_type, entry.get("description"))
                )
        # files[n] not described in `attachments` are still uploaded
        result += [self._store_attachment(channel_id, f.filename, f.data, f.content_type) for f in by_index.values()]
        return result

    def _new_message(
        self,
        channel: FakeChannel,
        body: Dict[str, Any],
        files: List[FakeAttachment],
        *,
        source: str,
        extra_flags: int = 0,
        allow_empty: bool = False,
        interaction: Optional[InteractionHandle] = None,
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
            msg.webhook_id = self.application_id
            msg.application_id = self.application_id
            if source == "followup":
                msg.type = 19  # follow-ups reply to the original response
            elif interaction.type == it.APPLICATION_COMMAND:
                msg.type = 20  # CHAT_INPUT_COMMAND
            user = interaction.user.user if isinstance(interaction.user, FakeMember) else interaction.user
            meta: Dict[str, Any] = {
                "id": str(interaction.id),
                "type": interaction.type,
                "user": user.payload(),
                "authorizing_integration_owners": interaction.payload.get("authorizing_integration_owners", {}),
            }
            if interaction.type == it.APPLICATION_COMMAND:
                meta["name"] = interaction.payload["data"]["name"]
            if source == "followup" and interaction.original_id:
                meta["original_response_message_id"] = str(interaction.original_id)
            if interaction.source_message_id:
                meta["interacted_message_id"] = str(interaction.source_message_id)
            msg.interaction_metadata = meta
        self._store_message(msg, channel, dispatch=True)
        return msg

    def _parse_mentions(self, msg: FakeMessage) -> None:
        user_ids = [int(i) for i in re.findall(r"<@!?(\d+)>", msg.content)]
        msg.mentions = [self.users[i] for i in dict.fromkeys(user_ids) if i in self.users]
        msg.mention_roles = list(dict.fromkeys(int(i) for i in re.findall(r"<@&(\d+)>", msg.content)))

    def _store_message(self, msg: FakeMessage, channel: FakeChannel, *, dispatch: bool) -> None:
        self._parse_mentions(msg)
        self.messages[msg.id] = msg
        if not msg.ephemeral:
            channel.last_message_id = msg.id
        if dispatch and not msg.ephemeral:
            self._dispatch_message_event("MESSAGE_CREATE", msg, channel)
        self._notify()

    def _edit_message(self, msg: FakeMessage, body: Dict[str, Any], files: List[FakeAttachment], *, via: str) -> None:
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
        if files or "attachments" in body:
            msg.attachments = self._attachments_from(msg.channel_id, body, files, msg.attachments)
        msg.flags &= ~FLAG_LOADING  # editing a deferred response replaces the "thinking" placeholder
        msg.edited_timestamp = iso_now()
        msg.edits.append({"via": via, "body": body, "files": [f.filename for f in files], "at": time.monotonic()})
        channel = self._channels.get(msg.channel_id)
        if channel is not None and not msg.ephemeral:
            self._dispatch_message_event("MESSAGE_UPDATE", msg, channel)
        self._notify()

    def _delete_message(self, msg: FakeMessage) -> None:
        msg.deleted = True
        if not msg.ephemeral:
            data: Dict[str, Any] = {"id": str(msg.id), "channel_id": str(msg.channel_id)}
            if msg.guild_id:
                data["guild_id"] = str(msg.guild_id)
            self._dispatch_for_channel(msg.guild_id, "MESSAGE_DELETE", lambda s: data)
        self._notify()

    def _dispatch_message_event(self, event: str, msg: FakeMessage, channel: FakeChannel) -> None:
        guild = self.guilds.get(channel.guild_id) if channel.guild_id else None

        def build(session: GatewaySession) -> Dict[str, Any]:
            data = msg.payload()
            if guild is not None:
                data["guild_id"] = str(guild.id)
                member = guild.members.get(msg.author.id)
                if member is not None:
                    data["member"] = member.payload(with_user=False)
            # Without MESSAGE_CONTENT, other users' messages arrive without content (unless the bot is mentioned).
            if (
                msg.author.id != self.bot_user.id
                and not session.wants(INTENT_MESSAGE_CONTENT)
                and self.bot_user not in msg.mentions
                and msg.guild_id is not None  # DMs to the bot always carry content
            ):
                data.update(content="", embeds=[], attachments=[], components=[])
            return data

        self._dispatch_for_channel(channel.guild_id, event, build)

    def _dispatch_for_channel(
        self, guild_id: Optional[int], event: str, build: Callable[[GatewaySession], Dict[str, Any]]
    ) -> None:
        intent = INTENT_GUILD_MESSAGES if guild_id else INTENT_DIRECT_MESSAGES
        for session in self.gateway.live_sessions():
            if session.wants(intent):
                session.dispatch(event, build(session))

    # ------------------------------------------------------------------------------------------
    # interaction plumbing

    def _command_data(
        self,
        guild: Optional[FakeGuild],
        command: str,
        options: Dict[str, Any],
        *,
        focused: Optional[str],
        require_synced: bool,
    ) -> Dict[str, Any]:
        names = command.split()
        top = None
        guild_scoped = False
        if guild is not None:
            top = _find_chat_command(self.guild_commands.get(guild.id, []), names[0])
            guild_scoped = top is not None
        if top is None:
            top = _find_chat_command(self.global_commands, names[0])
        if top is None and require_synced:
            guild_cmds = self.guild_commands.get(guild.id, []) if guild else []
            synced = [c["name"] for c in self.global_commands + guild_cmds]
            raise LookupError(f"command {names[0]!r} was never synced (synced: {synced}); call tree.sync() first")

        resolved: Dict[str, Dict[str, Any]] = {}
        root: List[Dict[str, Any]] = []
        current = root
        defs: Optional[List[Dict[str, Any]]] = top.get("options", []) if top else None
        for depth, sub in enumerate(names[1:]):
            if defs is not None:
                sub_def = next((o for o in defs if o["name"] == sub and o["type"] in (1, 2)), None)
                if sub_def is None:
                    raise LookupError(f"{command!r}: no subcommand {sub!r}; options are {[o['name'] for o in defs]}")
                kind = sub_def["type"]
                defs = sub_def.get("options", [])
            else:
                kind = it.SUB_COMMAND if depth == len(names) - 2 else it.SUB_COMMAND_GROUP
            node: Dict[str, Any] = {"name": sub, "type": kind, "options": []}
            current.append(node)
            current = node["options"]

        if defs is not None and any(o["type"] in (1, 2) for o in defs):
            subs = [o["name"] for o in defs if o["type"] in (1, 2)]
            raise LookupError(f"{command!r} is a group: name one of its subcommands {subs}")

        guild_id = guild.id if guild else None
        for name, value in options.items():
            if defs is not None:
                opt_def = next((o for o in defs if o["name"] == name and o["type"] not in (1, 2)), None)
                if opt_def is None:
                    raise LookupError(f"{command!r} has no option {name!r}; it has {[o['name'] for o in defs]}")
                kind = opt_def["type"]
            else:
                opt_def, kind = None, infer_option_type(value)
            if name == focused:
                # Autocomplete sends whatever has been typed so far, as typed.
                typed = value if isinstance(value, str) else str(value)
                current.append({"name": name, "type": kind, "value": typed, "focused": True})
                continue
            node = {"name": name, "type": kind, "value": self._option_value(kind, value, resolved, guild)}
            if opt_def is not None:
                _check_option_limits(opt_def, node["value"])
            current.append(node)
        if focused is None and defs is not None:
            missing = [o["name"] for o in defs if o.get("required") and o["name"] not in options]
            if missing:
                raise ValueError(f"{command!r} is missing required options {missing}")
        if focused is not None and focused not in options:
            raise ValueError(f"focused option {focused!r} must be given in options")

        data: Dict[str, Any] = {"id": str(top["id"]) if top else str(self.snowflake()), "name": names[0], "type": 1}
        if root:
            data["options"] = root
        if resolved:
            data["resolved"] = resolved
        if guild_scoped:
            data["guild_id"] = str(guild_id)
        return data

    def _option_value(
        self, kind: int, value: Any, resolved: Dict[str, Dict[str, Any]], guild: Optional[FakeGuild]
    ) -> Any:
        if kind == it.STRING:
            return str(value)
        if kind == it.INTEGER:
            return int(value)
        if kind == it.NUMBER:
            return float(value)
        if kind == it.BOOLEAN:
            return bool(value)
        if kind in (it.USER, it.MENTIONABLE) and isinstance(value, (FakeMember, FakeUser)):
            user = value.user if isinstance(value, FakeMember) else value
            resolved.setdefault("users", {})[str(user.id)] = user.payload()
            member = value if isinstance(value, FakeMember) else (guild.members.get(user.id) if guild else None)
            if member is not None and guild is not None:
                resolved.setdefault("members", {})[str(user.id)] = member.payload(
                    with_user=False, permissions=guild.base_permissions(member)
                )
            return str(user.id)
        if kind in (it.ROLE, it.MENTIONABLE) and isinstance(value, FakeRole):
            resolved.setdefault("roles", {})[str(value.id)] = value.payload()
            return str(value.id)
        if kind == it.CHANNEL and isinstance(value, FakeChannel):
            data = value.payload()
            data["permissions"] = str(ALL if guild is None else guild.permissions_in(guild.me, value))
            resolved.setdefault("channels", {})[str(value.id)] = data
            return str(value.id)
        if kind == it.ATTACHMENT and isinstance(value, FakeAttachment):
            resolved.setdefault("attachments", {})[str(value.id)] = value.payload()
            return str(value.id)
        raise TypeError(f"cannot send {value!r} as option type {kind}")

    async def _push_interaction(
        self,
        kind: int,
        guild: Optional[FakeGuild],
        channel: FakeChannel,
        member: Union[FakeMember, FakeUser],
        data: Dict[str, Any],
        *,
        message: Optional[FakeMessage] = None,
        locale: str = "en-US",
    ) -> InteractionHandle:
        # A reconnect may be in flight (drop, op 7): give it session_wait seconds before failing.
        try:
            await self.wait_until(self.gateway.connected_sessions, self.session_wait, "a gateway connection")
        except FakeDiscordTimeout:
            raise RuntimeError(
                "no gateway session: start the client (and wait for READY) before pushing interactions"
            ) from None
        sessions = self.gateway.connected_sessions()
        iid = self.snowflake()
        token = next_token()
        payload: Dict[str, Any] = {
            "id": str(iid),
            "application_id": str(self.application_id),
            "type": kind,
            "data": data,
            "token": token,
            "version": 1,
            "locale": locale,
            "entitlements": [],
            "entitlement_sku_ids": [],
            "channel_id": str(channel.id),
        }
        if guild is not None:
            if channel.guild_id != guild.id:
                raise ValueError(f"channel {channel.name!r} is not in guild {guild.name!r}")
            if member.id not in guild.members:
                raise ValueError(f"{member!r} is not a member of guild {guild.name!r}")
            member = guild.members[member.id]
            perms = guild.permissions_in(member, channel)
            channel_data = channel.payload()
            channel_data["permissions"] = str(perms)
            payload.update(
                guild_id=str(guild.id),
                guild={"id": str(guild.id), "locale": guild.locale, "features": []},
                guild_locale=guild.locale,
                channel=channel_data,
                member=member.payload(permissions=perms),
                app_permissions=str(guild.permissions_in(guild.me, channel)),
                authorizing_integration_owners={"0": str(guild.id)},
                context=0,
                attachment_size_limit=guild.upload_limit,
            )
        else:
            user = member.user if isinstance(member, FakeMember) else member
            payload.update(
                channel=channel.payload(),
                user=user.payload(),
                app_permissions=str(ALL),
                authorizing_integration_owners={"0": "0"},
                context=1,
                attachment_size_limit=self.default_upload_limit,
            )
        if message is not None:
            payload["message"] = message.payload()
        handle = InteractionHandle(
            server=self,
            id=iid,
            token=token,
            type=kind,
            payload=payload,
            guild_id=guild.id if guild else None,
            channel=channel,
            user=member,
            source_message_id=message.id if message else None,
        )
        self.interactions[iid] = handle
        # Discord delivers an interaction to one session; the newest connected one stands in for "the bot".
        sessions[-1].dispatch("INTERACTION_CREATE", payload)
        self._notify()
        return handle

    def _handle_by_token(self, app_id: str, token: str) -> InteractionHandle:
        if str(app_id) != str(self.application_id):
            raise _unknown("Webhook", 10015)
        for h in self.interactions.values():
            if h.token == token:
                return h
        raise _unknown("Webhook", 10015)

    def _upload_limit_for(self, channel: Optional[FakeChannel]) -> int:
        if channel is not None and channel.guild_id in self.guilds:
            return self.guilds[channel.guild_id].upload_limit
        return self.default_upload_limit

    def _check_upload(self, files: List[FakeAttachment], channel: Optional[FakeChannel]) -> None:
        limit = self._upload_limit_for(channel)
        if any(f.size > limit for f in files):
            raise ApiError(413, 40005, "Request entity too large")

    # ------------------------------------------------------------------------------------------
    # HTTP plumbing

    def _build_routes(self) -> List[_Route]:
        r: List[_Route] = []

        def add(method: str, template: str, handler: Handler, auth: bool = True) -> None:
            r.append(_Route(method, template, handler, auth))

        add("GET", "/gateway", self._get_gateway, auth=False)
        add("GET", "/gateway/bot", self._get_gateway_bot)
        add("GET", "/users/@me", self._get_me)
        add("POST", "/users/@me/channels", self._create_dm)
        add("GET", "/users/{user_id}", self._get_user)
        add("GET", "/oauth2/applications/@me", self._get_application)
        add("GET", "/applications/@me", self._get_application)
        add("GET", "/applications/{application_id}/commands", self._list_commands)
        add("PUT", "/applications/{application_id}/commands", self._put_commands)
        add("POST", "/applications/{application_id}/commands", self._upsert_command)
        add("GET", "/applications/{application_id}/commands/{command_id}", self._get_command)
        add("PATCH", "/applications/{application_id}/commands/{command_id}", self._patch_command)
        add("DELETE", "/applications/{application_id}/commands/{command_id}", self._delete_command)
        add("GET", "/applications/{application_id}/guilds/{guild_id}/commands", self._list_commands)
        add("PUT", "/applications/{application_id}/guilds/{guild_id}/commands", self._put_commands)
        add("POST", "/applications/{application_id}/guilds/{guild_id}/commands", self._upsert_command)
        add("GET", "/applications/{application_id}/guilds/{guild_id}/commands/{command_id}", self._get_command)
        add("PATCH", "/applications/{application_id}/guilds/{guild_id}/commands/{command_id}", self._patch_command)
        add("DELETE", "/applications/{application_id}/guilds/{guild_id}/commands/{command_id}", self._delete_command)
        add("POST", "/interactions/{interaction_id}/{token}/callback", self._interaction_callback, auth=False)
        add("POST", "/webhooks/{application_id}/{token}", self._followup, auth=False)
        for method in ("GET", "PATCH", "DELETE"):
            add(method, "/webhooks/{application_id}/{token}/messages/{message_id}", self._webhook_message, auth=False)
        add("GET", "/channels/{channel_id}", self._get_channel)
        add("GET", "/channels/{channel_id}/messages", self._list_messages)
        add("POST", "/channels/{channel_id}/messages", self._create_message)
        add("GET", "/channels/{channel_id}/messages/{message_id}", self._get_message)
        add("PATCH", "/channels/{channel_id}/messages/{message_id}", self._patch_message)
        add("DELETE", "/channels/{channel_id}/messages/{message_id}", self._delete_message_route)
        add("POST", "/channels/{channel_id}/typing", self._typing)
        add("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me", self._add_reaction)
        add("DELETE", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me", self._remove_reaction)
        add("GET", "/guilds/{guild_id}", self._get_guild)
        add("GET", "/guilds/{guild_id}/channels", self._get_guild_channels)
        add("GET", "/guilds/{guild_id}/roles", self._get_roles)
        add("GET", "/guilds/{guild_id}/members", self._list_members)
        add("GET", "/guilds/{guild_id}/members/{user_id}", self._get_member)
        add("PUT", "/guilds/{guild_id}/members/{user_id}/roles/{role_id}", self._add_member_role)
        add("DELETE", "/guilds/{guild_id}/members/{user_id}/roles/{role_id}", self._remove_member_role)
        return r

    async def _read_body(self, request: web.Request) -> Tuple[Any, List[FakeAttachment]]:
        ctype = request.headers.get("Content-Type", "")
        if ctype.startswith("multipart/"):
            payload: Any = None
            files: List[FakeAttachment] = []
            reader = await request.multipart()
            async for part in reader:
                name = part.name or ""
                raw = await part.read(decode=False)
                if name == "payload_json":
                    payload = json.loads(raw.decode())
                elif part.filename is not None or name.startswith("files["):
                    files.append(
                        FakeAttachment(
                            id=0,
                            filename=part.filename or name,
                            data=bytes(raw),
                            # discord.py labels every file application/octet-stream; Discord sniffs the type.
                            content_type=mimetypes.guess_type(part.filename or "")[0]
                            or part.headers.get("Content-Type"),
                        )
                    )
            return payload, files
        raw = await request.read()
        if not raw:
            return None, []
        try:
            return json.loads(raw), []
        except ValueError:
            return raw.decode(errors="replace"), []

    async def _api(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        method = request.method
        body, files = await self._read_body(request)
        route, params = None, {}
        for candidate in self._routes:
            if candidate.method != method:
                continue
            m = candidate.pattern.match(path)
            if m:
                route, params = candidate, m.groupdict()
                break
        rec = RecordedRequest(
            method=method,
            path=path,
            route=route.template if route else None,
            params=params,
            query=dict(request.query),
            json=body,
            files=files,
            headers=dict(request.headers),
        )
        self.requests.append(rec)
        status: int
        result: Any
        try:
            self._maybe_fail(method, path)
            if route is None:
                self.unhandled.append(rec)
                log.warning("fake discord: unhandled %s %s", method, path)
                raise ApiError(404, 0, "404: Not Found")
            if route.auth and request.headers.get("Authorization") != f"Bot {self.token}":
                raise ApiError(401, 0, "401: Unauthorized")
            status, result = await route.handler(rec, **params)
        except ApiError as e:
            status, result = e.status, e.body
        rec.status, rec.response = status, result
        self._notify()
        headers = {
            # Generous, never-exhausted buckets: discord.py must not sleep in tests.
            "X-RateLimit-Limit": "50",
            "X-RateLimit-Remaining": "49",
            "X-RateLimit-Reset-After": "1.0",
            "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
            "X-RateLimit-Bucket": f"fake-{route.template if route else 'unknown'}",
        }
        if status == 204 or result is None:
            return web.Response(status=204 if status < 300 else status, headers=headers)
        # Exactly "application/json": discord.py's json_or_text compares the header verbatim.
        headers["Content-Type"] = "application/json"
        return web.Response(body=json.dumps(result).encode(), status=status, headers=headers)

    def _maybe_fail(self, method: str, path: str) -> None:
        for f in self._failures:
            if f["times"] > 0 and f["method"] == method and f["re"].search(path):
                f["times"] -= 1
                raise ApiError(f["status"], f["code"], f["message"])

    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        att = self.attachments.get(int(request.match_info["attachment_id"]))
        if att is None:
            return web.Response(status=404)
        return web.Response(body=att.data, content_type=att.content_type or "application/octet-stream")

    # -- lookups raising Discord's errors -----------------------------------------------------

    def _get_channel_or_404(self, channel_id: str) -> FakeChannel:
        try:
            return self._channels[int(channel_id)]
        except (KeyError, ValueError):
            raise _unknown("Channel", 10003) from None

    def _get_guild_or_404(self, guild_id: str) -> FakeGuild:
        try:
            return self.guilds[int(guild_id)]
        except (KeyError, ValueError):
            raise _unknown("Guild", 10004) from None

    def _get_message_or_404(self, channel: FakeChannel, message_id: str) -> FakeMessage:
        msg = self.messages.get(int(message_id)) if message_id.isdigit() else None
        if msg is None or msg.deleted or msg.channel_id != channel.id or msg.ephemeral:
            raise _unknown("Message", 10008)
        return msg

    def _bot_perms(self, channel: FakeChannel) -> int:
        if channel.guild_id is None:
            return ALL
        guild = self.guilds[channel.guild_id]
        return guild.permissions_in(guild.me, channel)

    def _require(self, channel: FakeChannel, bits: int) -> None:
        perms = self._bot_perms(channel)
        if not perms & VIEW_CHANNEL:
            raise ApiError(403, 50001, "Missing Access")
        if perms & bits != bits:
            raise ApiError(403, 50013, "Missing Permissions")

    # -- REST handlers --------------------------------------------------------------------------

    async def _get_gateway(self, rec: RecordedRequest) -> Reply:
        return 200, {"url": self.gateway_url}

    async def _get_gateway_bot(self, rec: RecordedRequest) -> Reply:
        return 200, {
            "url": self.gateway_url,
            "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
        }

    async def _get_me(self, rec: RecordedRequest) -> Reply:
        return 200, self.bot_user_payload()

    async def _get_user(self, rec: RecordedRequest, user_id: str) -> Reply:
        user = self.users.get(int(user_id)) if user_id.isdigit() else None
        if user is None:
            raise _unknown("User", 10013)
        return 200, user.payload()

    async def _create_dm(self, rec: RecordedRequest) -> Reply:
        user = self.users.get(int((rec.json or {}).get("recipient_id", 0)))
        if user is None:
            raise _unknown("User", 10013)
        return 200, self.dm_channel(user).payload()

    async def _get_application(self, rec: RecordedRequest) -> Reply:
        return 200, {
            "id": str(self.application_id),
            "name": self.bot_user.username,
            "description": "",
            "icon": None,
            "bot_public": True,
            "bot_require_code_grant": False,
            "owner": self.app_owner.payload(),
            "team": None,
            "verify_key": "0" * 64,
            "flags": self.application_flags,
            "bot": self.bot_user.payload(),
            "interactions_endpoint_url": None,  # non-null would make discord.py warn: no gateway interactions
            "redirect_uris": [],
            "summary": "",
            "tags": [],
            "approximate_guild_count": len(self.guilds),
            "integration_types_config": {"0": {}},
        }

    # application commands

    def _command_store(self, application_id: str, guild_id: Optional[str]) -> List[Dict[str, Any]]:
        if str(application_id) != str(self.application_id):
            raise ApiError(403, 50001, "Missing Access")
        if guild_id is None:
            return self.global_commands
        gid = self._get_guild_or_404(guild_id).id
        return self.guild_commands.setdefault(gid, [])

    def _validate_command(self, cmd: Dict[str, Any]) -> None:
        """A few of Discord's checks, so a bad definition fails in tests as it would in production."""
        ctype = cmd.get("type", 1)
        name = cmd.get("name", "")
        if not (1 <= len(name) <= 32) or (ctype == 1 and (not re.fullmatch(r"[-_\w]+", name) or name != name.lower())):
            raise invalid_form("name", "APPLICATION_COMMAND_INVALID_NAME", f"Command name is invalid: {name!r}")
        if ctype == 1 and not (1 <= len(cmd.get("description", "")) <= 100):
            raise invalid_form("description", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")

        def check_options(options: List[Dict[str, Any]], where: str) -> None:
            if len(options) > 25:
                raise invalid_form(where, "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
            seen_optional = False
            for o in options:
                here = f"{where}.{o['name']}"
                if o["type"] in (it.SUB_COMMAND, it.SUB_COMMAND_GROUP):
                    check_options(o.get("options", []), f"{here}.options")
                    continue
                if not o.get("required"):
                    seen_optional = True
                elif seen_optional:
                    raise invalid_form(
                        here,
                        "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                        "Required options must be placed before non-required options",
                    )
                if len(o.get("choices") or []) > 25:
                    raise invalid_form(f"{here}.choices", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
                if not (1 <= len(o.get("description", "")) <= 100):
                    raise invalid_form(
                        f"{here}.description", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length."
                    )

        check_options(cmd.get("options") or [], "options")

    def _stored_command(
        self, cmd: Dict[str, Any], guild_id: Optional[str], existing: List[Dict[str, Any]]
    ) -> Dict[str, Any]:
        self._validate_command(cmd)
        old = next((c for c in existing if c["name"] == cmd["name"] and c.get("type", 1) == cmd.get("type", 1)), None)
        stored = dict(cmd)
        stored.setdefault("type", 1)
        stored.setdefault("options", [])
        stored.setdefault("description", "")
        stored.update(
            id=old["id"] if old else str(self.snowflake()),
            application_id=str(self.application_id),
            version=str(self.snowflake()),
        )
        if guild_id is not None:
            stored["guild_id"] = str(guild_id)
        return stored

    async def _list_commands(
        self, rec: RecordedRequest, application_id: str, guild_id: Optional[str] = None
    ) -> Reply:
        return 200, self._command_store(application_id, guild_id)

    async def _put_commands(
        self, rec: RecordedRequest, application_id: str, guild_id: Optional[str] = None
    ) -> Reply:
        store = self._command_store(application_id, guild_id)
        new = [self._stored_command(c, guild_id, store) for c in rec.json or []]
        names = [(c["name"], c["type"]) for c in new]
        if len(set(names)) != len(names):
            raise invalid_form("", "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique")
        store[:] = new
        return 200, new

    async def _upsert_command(
        self, rec: RecordedRequest, application_id: str, guild_id: Optional[str] = None
    ) -> Reply:
        store = self._command_store(application_id, guild_id)
        cmd = self._stored_command(rec.json or {}, guild_id, store)
        store[:] = [c for c in store if c["id"] != cmd["id"]] + [cmd]
        return 201, cmd

    def _find_command(self, store: List[Dict[str, Any]], command_id: str) -> Dict[str, Any]:
        cmd = next((c for c in store if c["id"] == command_id), None)
        if cmd is None:
            raise _unknown("application command", 10063)
        return cmd

    async def _get_command(
        self, rec: RecordedRequest, application_id: str, command_id: str, guild_id: Optional[str] = None
    ) -> Reply:
        return 200, self._find_command(self._command_store(application_id, guild_id), command_id)

    async def _patch_command(
        self, rec: RecordedRequest, application_id: str, command_id: str, guild_id: Optional[str] = None
    ) -> Reply:
        cmd = self._find_command(self._command_store(application_id, guild_id), command_id)
        cmd.update(rec.json or {})
        return 200, cmd

    async def _delete_command(
        self, rec: RecordedRequest, application_id: str, command_id: str, guild_id: Optional[str] = None
    ) -> Reply:
        store = self._command_store(application_id, guild_id)
        self._find_command(store, command_id)
        store[:] = [c for c in store if c["id"] != command_id]
        return 204, None

    # interactions

    async def _interaction_callback(self, rec: RecordedRequest, interaction_id: str, token: str) -> Reply:
        h = self.interactions.get(int(interaction_id)) if interaction_id.isdigit() else None
        if h is None or h.token != token:
            raise _unknown("interaction", 10062)
        if h.responded:
            raise ApiError(400, 40060, "Interaction has already been acknowledged.")
        delay = time.monotonic() - h.dispatched_at
        if self.interaction_ack_timeout is not None and delay > self.interaction_ack_timeout:
            raise _unknown("interaction", 10062)  # what Discord answers to a late first response
        body = rec.json or {}
        kind = int(body.get("type", 0))
        data = body.get("data") or {}
        self._check_upload(rec.files, h.channel)
        message: Optional[FakeMessage] = None
        component_like = h.type in (it.MESSAGE_COMPONENT, it.MODAL_SUBMIT) and h.source_message_id is not None

        def invalid(why: str) -> ApiError:
            return invalid_form("type", "INTERACTION_RESPONSE_TYPE_INVALID", why)

        if kind == it.PONG:
            raise invalid("PONG is only for HTTP interactions")
        if kind in (it.CHANNEL_MESSAGE, it.DEFERRED_CHANNEL_MESSAGE) and h.type == it.AUTOCOMPLETE:
            raise invalid("autocomplete interactions only accept type 8")
        if kind == it.CHANNEL_MESSAGE:
            message = self._new_message(h.channel, data, rec.files, source="interaction_response", interaction=h)
            h.original_id = message.id
        elif kind == it.DEFERRED_CHANNEL_MESSAGE:
            flags = int(data.get("flags") or 0) & FLAG_EPHEMERAL
            message = self._new_message(
                h.channel,
                {},
                [],
                source="interaction_response",
                extra_flags=flags | FLAG_LOADING,
                allow_empty=True,
                interaction=h,
            )
            h.original_id = message.id
        elif kind in (it.DEFERRED_UPDATE_MESSAGE, it.UPDATE_MESSAGE):
            if not component_like:
                raise invalid("only component and modal interactions can update a message")
            message = self.messages[h.source_message_id]  # type: ignore[index]
            h.original_id = message.id
            if kind == it.UPDATE_MESSAGE:
                self._edit_message(message, data, rec.files, via="interaction_update")
        elif kind == it.AUTOCOMPLETE_RESULT:
            if h.type != it.AUTOCOMPLETE:
                raise invalid("type 8 answers autocomplete interactions only")
            if len(data.get("choices") or []) > 25:
                raise invalid_form("data.choices", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
        elif kind == it.MODAL:
            if h.type in (it.AUTOCOMPLETE, it.MODAL_SUBMIT):
                raise invalid("cannot answer this interaction with a modal")
        else:
            raise invalid(f"unknown response type {kind}")

        h.callbacks.append(
            InteractionCallback(type=kind, data=data, files=rec.files, request=rec, message=message, delay=delay)
        )
        self._notify()
        if "with_response" not in rec.query or rec.query["with_response"] in ("0", "false", "False"):
            return 204, None
        result: Dict[str, Any] = {"interaction": {"id": str(h.id), "type": h.type}}
        if message is not None:
            result["interaction"].update(
                response_message_id=str(message.id),
                response_message_loading=message.loading,
                response_message_ephemeral=message.ephemeral,
            )
            result["resource"] = {"type": kind, "message": message.payload()}
        elif kind in (it.AUTOCOMPLETE_RESULT, it.MODAL):
            result["resource"] = {"type": kind}
        return 200, result

    async def _followup(self, rec: RecordedRequest, application_id: str, token: str) -> Reply:
        h = self._handle_by_token(application_id, token)
        if not h.responded:
            raise _unknown("Webhook", 10015)  # follow-ups need an acknowledged interaction
        self._check_upload(rec.files, h.channel)
        msg = self._new_message(h.channel, rec.json or {}, rec.files, source="followup", interaction=h)
        h.followup_ids.append(msg.id)
        self._notify()
        if rec.query.get("wait") in ("1", "true", "True"):
            return 200, msg.payload()
        return 204, None

    async def _webhook_message(
        self, rec: RecordedRequest, application_id: str, token: str, message_id: str
    ) -> Reply:
        h = self._handle_by_token(application_id, token)
        mid = h.original_id if message_id == "@original" else (int(message_id) if message_id.isdigit() else None)
        if mid is None or (mid != h.original_id and mid not in h.followup_ids) or self.messages[mid].deleted:
            raise _unknown("Message", 10008)
        msg = self.messages[mid]
        if rec.method == "GET":
            return 200, msg.payload()
        if rec.method == "DELETE":
            self._delete_message(msg)
            return 204, None
        self._check_upload(rec.files, h.channel)
        self._edit_message(msg, rec.json or {}, rec.files, via="webhook")
        return 200, msg.payload()

    # channels and messages

    async def _get_channel(self, rec: RecordedRequest, channel_id: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        self._require(channel, 0)
        return 200, channel.payload()

    async def _list_messages(self, rec: RecordedRequest, channel_id: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        self._require(channel, 0)
        msgs = self.channel_messages(channel)
        q = rec.query
        if "before" in q:
            msgs = [m for m in msgs if m.id < int(q["before"])]
        if "after" in q:
            msgs = [m for m in msgs if m.id > int(q["after"])]
        limit = int(q.get("limit", 50))
        if "after" in q:
            msgs = msgs[:limit]
        else:
            msgs = msgs[-limit:]
        return 200, [m.payload() for m in reversed(msgs)]  # newest first, like Discord

    async def _create_message(self, rec: RecordedRequest, channel_id: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        self._require(channel, SEND_MESSAGES | (ATTACH_FILES if rec.files else 0))
        self._check_upload(rec.files, channel)
        body = rec.json or {}
        if int(body.get("flags") or 0) & FLAG_EPHEMERAL:
            raise invalid_form("flags", "MESSAGE_FLAGS_INVALID", "Ephemeral messages need an interaction")
        nonce = body.get("nonce")
        if nonce is not None and body.get("enforce_nonce"):
            earlier = self._nonces.get((self.bot_user.id, str(nonce)))
            if earlier is not None and not earlier.deleted:
                return 200, earlier.payload()
        msg = self._new_message(channel, body, rec.files, source="channel")
        if nonce is not None and body.get("enforce_nonce"):
            self._nonces[(self.bot_user.id, str(nonce))] = msg
        return 200, msg.payload()

    async def _get_message(self, rec: RecordedRequest, channel_id: str, message_id: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        self._require(channel, 0)
        return 200, self._get_message_or_404(channel, message_id).payload()

    async def _patch_message(self, rec: RecordedRequest, channel_id: str, message_id: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        msg = self._get_message_or_404(channel, message_id)
        if msg.author.id != self.bot_user.id:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        self._check_upload(rec.files, channel)
        self._edit_message(msg, rec.json or {}, rec.files, via="channel")
        return 200, msg.payload()

    async def _delete_message_route(self, rec: RecordedRequest, channel_id: str, message_id: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        msg = self._get_message_or_404(channel, message_id)
        if msg.author.id != self.bot_user.id:
            self._require(channel, MANAGE_MESSAGES)
        self._delete_message(msg)
        return 204, None

    async def _typing(self, rec: RecordedRequest, channel_id: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        self._require(channel, SEND_MESSAGES)
        return 204, None

    async def _add_reaction(self, rec: RecordedRequest, channel_id: str, message_id: str, emoji: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        msg = self._get_message_or_404(channel, message_id)
        name = urllib.parse.unquote(emoji)
        msg.reactions[name] = msg.reactions.get(name, 0) + 1
        return 204, None

    async def _remove_reaction(self, rec: RecordedRequest, channel_id: str, message_id: str, emoji: str) -> Reply:
        channel = self._get_channel_or_404(channel_id)
        msg = self._get_message_or_404(channel, message_id)
        name = urllib.parse.unquote(emoji)
        if msg.reactions.get(name):
            msg.reactions[name] -= 1
            if not msg.reactions[name]:
                del msg.reactions[name]
        return 204, None

    # guilds

    async def _get_guild(self, rec: RecordedRequest, guild_id: str) -> Reply:
        guild = self._get_guild_or_404(guild_id)
        data = guild.payload()
        if rec.query.get("with_counts") in ("1", "true"):
            data.update(approximate_member_count=len(guild.members), approximate_presence_count=0)
        return 200, data

    async def _get_guild_channels(self, rec: RecordedRequest, guild_id: str) -> Reply:
        return 200, [c.payload() for c in self._get_guild_or_404(guild_id).channels.values()]

    async def _get_roles(self, rec: RecordedRequest, guild_id: str) -> Reply:
        return 200, [r.payload() for r in self._get_guild_or_404(guild_id).roles.values()]

    async def _list_members(self, rec: RecordedRequest, guild_id: str) -> Reply:
        guild = self._get_guild_or_404(guild_id)
        after = int(rec.query.get("after", 0))
        limit = int(rec.query.get("limit", 1))
        members = sorted((m for m in guild.members.values() if m.id > after), key=lambda m: m.id)[:limit]
        return 200, [m.payload() for m in members]

    def _member_or_404(self, guild: FakeGuild, user_id: str) -> FakeMember:
        member = guild.members.get(int(user_id)) if user_id.isdigit() else None
        if member is None:
            raise _unknown("Member", 10007)
        return member

    async def _get_member(self, rec: RecordedRequest, guild_id: str, user_id: str) -> Reply:
        guild = self._get_guild_or_404(guild_id)
        return 200, self._member_or_404(guild, user_id).payload()

    def _role_or_404(self, guild: FakeGuild, role_id: str) -> FakeRole:
        role = guild.roles.get(int(role_id)) if role_id.isdigit() else None
        if role is None:
            raise _unknown("Role", 10011)
        return role

    async def _add_member_role(self, rec: RecordedRequest, guild_id: str, user_id: str, role_id: str) -> Reply:
        guild = self._get_guild_or_404(guild_id)
        member, role = self._member_or_404(guild, user_id), self._role_or_404(guild, role_id)
        if not guild.base_permissions(guild.me) & MANAGE_ROLES:
            raise ApiError(403, 50013, "Missing Permissions")
        member.add_role(role)
        return 204, None

    async def _remove_member_role(self, rec: RecordedRequest, guild_id: str, user_id: str, role_id: str) -> Reply:
        guild = self._get_guild_or_404(guild_id)
        member, role = self._member_or_404(guild, user_id), self._role_or_404(guild, role_id)
        if not guild.base_permissions(guild.me) & MANAGE_ROLES:
            raise ApiError(403, 50013, "Missing Permissions")
        member.remove_role(role)
        return 204, None

