"""FakeDiscord: an aiohttp server that plays Discord's REST API v10 and gateway on 127.0.0.1.

The class is assembled from one mixin per resource, each with its helpers, its test-facing methods
and its @route handlers: guilds.py (the world), messages.py (channels and messages), attachments.py
(uploads and their URLs), application.py (login and commands), interaction_routes.py
(interactions), rest.py (routing and faults); gateway.py is the websocket. This module holds the
shared state, the lifecycle and the waits. See the package docstring (__init__.py) for how tests
use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Any

from aiohttp import web

from .application import ApplicationMixin
from .attachments import AttachmentsMixin
from .automod import AutoModMixin
from .errors import FakeDiscordTimeout
from .gateway import Gateway
from .guilds import FakeGuild, GuildsMixin
from .interaction_routes import InteractionsMixin
from .interactions import InteractionHandle
from .messages import MessagesMixin
from .models import (
    DEFAULT_UPLOAD_LIMIT,
    FakeAttachment,
    FakeChannel,
    FakeMessage,
    FakeUser,
    RecordedRequest,
    SnowflakeGenerator,
)
from .rest import Fault, RestMixin, collect_routes


class FakeDiscord(GuildsMixin, MessagesMixin, AttachmentsMixin, ApplicationMixin, InteractionsMixin, AutoModMixin, RestMixin):
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
        interaction_ack_timeout: float | None = None,
    ) -> None:
        self.token = token
        self.snowflake = SnowflakeGenerator()
        self.application_id = self.snowflake()
        # Modern bot users share the application's id.
        self.bot_user = FakeUser(id=self.application_id, username=bot_name, bot=True)
        self.app_owner = FakeUser(id=self.snowflake(), username="app-owner")
        self.application_flags = application_flags
        self.default_upload_limit = default_upload_limit

        self.users: dict[int, FakeUser] = {self.bot_user.id: self.bot_user, self.app_owner.id: self.app_owner}
        self.guilds: dict[int, FakeGuild] = {}
        self._channels: dict[int, FakeChannel] = {}
        self.messages: dict[int, FakeMessage] = {}
        self._nonces: dict[str, FakeMessage] = {}  # enforce_nonce: nonce -> the message it created
        self.attachments: dict[int, FakeAttachment] = {}
        self.global_commands: list[dict[str, Any]] = []
        self.guild_commands: dict[int, list[dict[str, Any]]] = {}
        self.interactions: dict[int, InteractionHandle] = {}
        self.requests: list[RecordedRequest] = []
        self.unhandled: list[RecordedRequest] = []  # requests to routes the fake does not know
        self.faults: list[Fault] = []  # see fail_next
        self.presence_updates: list[dict[str, Any]] = []
        # Discord rejects initial callbacks after 3 s with 10062. Off (None) by default so a loaded
        # CI machine cannot make tests flaky; set 3.0 to hold the bot to it (delay is recorded anyway).
        self.interaction_ack_timeout = interaction_ack_timeout
        # How long slash()/click()/... wait for a gateway connection (e.g. a resume in flight).
        self.session_wait = 2.0

        self.gateway = Gateway(self, heartbeat_interval_ms=heartbeat_interval_ms, compression=gateway_compression)
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port: int = 0
        self._routes = collect_routes(self)

    # -- lifecycle and URLs ------------------------------------------------------------------------

    async def start(self) -> FakeDiscord:
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

    async def __aenter__(self) -> FakeDiscord:
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

    # -- requests and waiting (test-facing) --------------------------------------------------------

    def requests_to(self, method: str, route: str) -> list[RecordedRequest]:
        """Recorded requests for a route template, e.g. ("POST", "/channels/{channel_id}/messages")."""
        return [r for r in self.requests if r.method == method and r.route == route]

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
            # Short cap: state changed by code that does not call _notify is still noticed.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(remaining, 0.05))

    async def wait_for_request(
        self,
        method: str,
        route: str,
        predicate: Callable[[RecordedRequest], bool] | None = None,
        *,
        timeout: float = 5.0,
        after: int = 0,
    ) -> RecordedRequest:
        """Wait for an answered request to a route template (index in self.requests >= after)."""
        pred = predicate or (lambda r: True)

        def find() -> RecordedRequest | None:
            matching = (r for r in self.requests[after:] if r.method == method and r.route == route and r.status)
            return next((r for r in matching if pred(r)), None)

        return await self.wait_until(find, timeout, f"{method} {route}")

    # -- gateway control (test-facing) -------------------------------------------------------------

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
