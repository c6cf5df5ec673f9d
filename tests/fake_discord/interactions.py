"""Interaction handles returned by FakeDiscord.slash/autocomplete/click, and option building."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Union

from .models import FakeAttachment, FakeChannel, FakeMember, FakeMessage, FakeRole, FakeUser, RecordedRequest

if TYPE_CHECKING:  # pragma: no cover
    from .server import FakeDiscord

# Interaction types
PING, APPLICATION_COMMAND, MESSAGE_COMPONENT, AUTOCOMPLETE, MODAL_SUBMIT = 1, 2, 3, 4, 5

# Interaction callback (response) types
PONG = 1
CHANNEL_MESSAGE = 4
DEFERRED_CHANNEL_MESSAGE = 5
DEFERRED_UPDATE_MESSAGE = 6
UPDATE_MESSAGE = 7
AUTOCOMPLETE_RESULT = 8
MODAL = 9

# Application command option types
SUB_COMMAND, SUB_COMMAND_GROUP = 1, 2
STRING, INTEGER, BOOLEAN, USER, CHANNEL, ROLE, MENTIONABLE, NUMBER, ATTACHMENT = 3, 4, 5, 6, 7, 8, 9, 10, 11


@dataclass
class InteractionCallback:
    """The bot's answer to POST /interactions/{id}/{token}/callback."""

    type: int
    data: Dict[str, Any]
    files: List[FakeAttachment]
    request: RecordedRequest
    message: Optional[FakeMessage] = None  # message created (4, 5) or updated (7)
    delay: float = 0.0  # seconds from INTERACTION_CREATE to this callback (Discord allows 3)

    @property
    def content(self) -> Optional[str]:
        return self.data.get("content")

    @property
    def embeds(self) -> List[Dict[str, Any]]:
        return self.data.get("embeds") or []

    @property
    def components(self) -> List[Dict[str, Any]]:
        return self.data.get("components") or []

    @property
    def flags(self) -> int:
        return int(self.data.get("flags") or 0)

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & (1 << 6))

    @property
    def choices(self) -> List[Dict[str, Any]]:
        """Autocomplete choices (type 8)."""
        return self.data.get("choices") or []

    @property
    def custom_id(self) -> Optional[str]:
        """Modal custom_id (type 9)."""
        return self.data.get("custom_id")


@dataclass(eq=False)
class InteractionHandle:
    """An interaction the fake pushed to the bot, and everything the bot answered on its token."""

    server: "FakeDiscord"
    id: int
    token: str
    type: int
    payload: Dict[str, Any]
    guild_id: Optional[int]
    channel: FakeChannel
    user: Union[FakeMember, FakeUser]
    source_message_id: Optional[int] = None  # the message a component was clicked on
    dispatched_at: float = field(default_factory=time.monotonic)
    callbacks: List[InteractionCallback] = field(default_factory=list)
    followup_ids: List[int] = field(default_factory=list)
    original_id: Optional[int] = None

    @property
    def responded(self) -> bool:
        return bool(self.callbacks)

    @property
    def response(self) -> Optional[InteractionCallback]:
        return self.callbacks[0] if self.callbacks else None

    @property
    def original(self) -> Optional[FakeMessage]:
        """The @original message: the response message, or the clicked message for 6/7 answers."""
        return self.server.messages.get(self.original_id) if self.original_id else None

    @property
    def followups(self) -> List[FakeMessage]:
        return [self.server.messages[i] for i in self.followup_ids]

    async def wait_response(self, timeout: float = 5.0) -> InteractionCallback:
        """Wait for the initial callback (any type) and return it."""
        await self.server.wait_until(lambda: self.responded, timeout, f"a response to interaction {self.id}")
        assert self.response is not None
        return self.response

    async def wait_followup(
        self, predicate: Optional[Callable[[FakeMessage], bool]] = None, *, timeout: float = 5.0
    ) -> FakeMessage:
        """Wait for a follow-up message (POST /webhooks/{app}/{token}) matching predicate."""
        pred = predicate or (lambda m: True)

        def find() -> Optional[FakeMessage]:
            return next((m for m in self.followups if pred(m)), None)

        await self.server.wait_until(
            lambda: find() is not None, timeout, f"a follow-up to interaction {self.id}; have {self.followups}"
        )
        return find()  # type: ignore[return-value]

    async def wait_original(
        self, predicate: Optional[Callable[[FakeMessage], bool]] = None, *, timeout: float = 5.0
    ) -> FakeMessage:
        """Wait until @original exists, is no longer a "thinking" placeholder, and matches predicate."""
        pred = predicate or (lambda m: True)

        def ok() -> bool:
            m = self.original
            return m is not None and not m.loading and pred(m)

        await self.server.wait_until(ok, timeout, f"@original of interaction {self.id} (now {self.original})")
        return self.original  # type: ignore[return-value]

    async def submit_modal(self, values: Mapping[str, Any], member: Optional[FakeMember] = None) -> "InteractionHandle":
        """Submit the modal this interaction answered with (type 9): values by component custom_id."""
        cb = self.response
        if cb is None or cb.type != MODAL:
            raise AssertionError(f"interaction {self.id} was not answered with a modal: {cb}")
        submitter = member or self.user
        return await self.server._modal_submit(self, cb.data, dict(values), submitter)


def infer_option_type(value: Any) -> int:
    """Option type for an unsynced command, from the Python value."""
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INTEGER
    if isinstance(value, float):
        return NUMBER
    if isinstance(value, (FakeMember, FakeUser)):
        return USER
    if isinstance(value, FakeChannel):
        return CHANNEL
    if isinstance(value, FakeRole):
        return ROLE
    if isinstance(value, FakeAttachment):
        return ATTACHMENT
    return STRING
