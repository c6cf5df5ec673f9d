"""Fake Discord: run the real discord.py client against a local server in end-to-end tests.

(usage docs below)
"""

from .client import patch_discord, running_client, start_client, stop_client
from .interactions import InteractionCallback, InteractionHandle
from .models import (
    FakeAttachment,
    FakeChannel,
    FakeGuild,
    FakeMember,
    FakeMessage,
    FakeRole,
    FakeUser,
    RecordedRequest,
)
from .server import ApiError, FakeDiscord, FakeDiscordTimeout

__all__ = [
    "ApiError",
    "FakeAttachment",
    "FakeChannel",
    "FakeDiscord",
    "FakeDiscordTimeout",
    "FakeGuild",
    "FakeMember",
    "FakeMessage",
    "FakeRole",
    "FakeUser",
    "InteractionCallback",
    "InteractionHandle",
    "RecordedRequest",
    "patch_discord",
    "running_client",
    "start_client",
    "stop_client",
]
