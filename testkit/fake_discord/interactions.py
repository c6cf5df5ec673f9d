"""Interaction handles returned by FakeDiscord.slash/autocomplete/click/select, and Discord's
interaction, callback and option type numbers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .guilds import FakeMember
from .models import FLAG_EPHEMERAL, FakeAttachment, FakeChannel, FakeMessage, FakeUser, RecordedRequest

if TYPE_CHECKING:  # pragma: no cover
    from .server import FakeDiscord

# Interaction types
PING, APPLICATION_COMMAND, MESSAGE_COMPONENT, AUTOCOMPLETE = 1, 2, 3, 4

# Interaction callback (response) types
PONG = 1
CHANNEL_MESSAGE = 4
DEFERRED_CHANNEL_MESSAGE = 5
DEFERRED_UPDATE_MESSAGE = 6
UPDATE_MESSAGE = 7
AUTOCOMPLETE_RESULT = 8

# Application command types (data.type of an APPLICATION_COMMAND interaction)
CHAT_INPUT, USER_COMMAND, MESSAGE_COMMAND = 1, 2, 3

# Application command option types
SUB_COMMAND, SUB_COMMAND_GROUP = 1, 2
STRING, INTEGER, BOOLEAN, USER, CHANNEL, ROLE, MENTIONABLE, NUMBER, ATTACHMENT = 3, 4, 5, 6, 7, 8, 9, 10, 11


@dataclass
class InteractionCallback:
    """The bot's answer to POST /interactions/{id}/{token}/callback."""

    type: int
    data: dict[str, Any]
    files: list[FakeAttachment]
    request: RecordedRequest
    message: FakeMessage | None = None  # message created (4, 5) or updated (7)
    delay: float = 0.0  # seconds from INTERACTION_CREATE to this callback (Discord allows 3)

    @property
    def content(self) -> str | None:
        return self.data.get("content")

    @property
    def embeds(self) -> list[dict[str, Any]]:
        return self.data.get("embeds") or []

    @property
    def components(self) -> list[dict[str, Any]]:
        return self.data.get("components") or []

    @property
    def flags(self) -> int:
        return int(self.data.get("flags") or 0)

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & FLAG_EPHEMERAL)

    @property
    def choices(self) -> list[dict[str, Any]]:
        """Autocomplete choices (type 8)."""
        return self.data.get("choices") or []


@dataclass(eq=False)
class InteractionHandle:
    """An interaction the fake pushed to the bot, and everything the bot answered on its token."""

    server: FakeDiscord
    id: int
    token: str
    type: int
    payload: dict[str, Any]
    guild_id: int | None
    channel: FakeChannel
    user: FakeMember | FakeUser
    source_message_id: int | None = None  # the message a component was clicked on
    dispatched_at: float = field(default_factory=time.monotonic)
    callbacks: list[InteractionCallback] = field(default_factory=list)
    followup_ids: list[int] = field(default_factory=list)
    original_id: int | None = None

    @property
    def responded(self) -> bool:
        return bool(self.callbacks)

    @property
    def response(self) -> InteractionCallback | None:
        return self.callbacks[0] if self.callbacks else None

    @property
    def original(self) -> FakeMessage | None:
        """The @original message: the response message, or the clicked message for 6/7 answers."""
        return self.server.messages.get(self.original_id) if self.original_id else None

    @property
    def followups(self) -> list[FakeMessage]:
        return [self.server.messages[i] for i in self.followup_ids]

    async def wait_response(self, timeout: float = 5.0) -> InteractionCallback:
        """Wait for the initial callback (any type) and return it."""
        await self.server.wait_until(lambda: self.responded, timeout, f"a response to interaction {self.id}")
        assert self.response is not None
        return self.response

    async def wait_followup(
        self, predicate: Callable[[FakeMessage], bool] | None = None, *, timeout: float = 5.0
    ) -> FakeMessage:
        """Wait for a follow-up message (POST /webhooks/{app}/{token}) matching predicate."""
        pred = predicate or (lambda m: True)

        def find() -> FakeMessage | None:
            return next((m for m in self.followups if pred(m)), None)

        await self.server.wait_until(
            lambda: find() is not None, timeout, f"a follow-up to interaction {self.id}; have {self.followups}"
        )
        return find()  # type: ignore[return-value]

    async def wait_original(
        self, predicate: Callable[[FakeMessage], bool] | None = None, *, timeout: float = 5.0
    ) -> FakeMessage:
        """Wait until @original exists, is no longer a "thinking" placeholder, and matches predicate."""
        pred = predicate or (lambda m: True)

        def ok() -> bool:
            m = self.original
            return m is not None and not m.loading and pred(m)

        await self.server.wait_until(ok, timeout, f"@original of interaction {self.id} (now {self.original})")
        return self.original  # type: ignore[return-value]

    def tie(self, msg: FakeMessage, *, followup: bool) -> None:
        """Mark msg as sent on this interaction's token (webhook, application, interaction_metadata)."""
        server = self.server
        msg.webhook_id = msg.application_id = server.application_id
        if followup:
            msg.type = 19  # follow-ups reply to the original response
        elif self.type == APPLICATION_COMMAND:
            msg.type = 20  # CHAT_INPUT_COMMAND
        user = self.user.user if isinstance(self.user, FakeMember) else self.user
        meta: dict[str, Any] = {
            "id": str(self.id),
            "type": self.type,
            "user": user.payload(),
            "authorizing_integration_owners": self.payload.get("authorizing_integration_owners", {}),
        }
        if self.type == APPLICATION_COMMAND:
            meta["name"] = self.payload["data"]["name"]
        if followup and self.original_id:
            meta["original_response_message_id"] = str(self.original_id)
        if self.source_message_id:
            meta["interacted_message_id"] = str(self.source_message_id)
        msg.interaction_metadata = meta
