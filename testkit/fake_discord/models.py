"""State objects of the fake Discord server (users, roles, channels, messages, attachments, recorded
requests) and their JSON payloads; guilds and members are in guilds.py.

Payload shapes follow Discord's API v10 as discord.py 2.7 parses them (see discord/types/ in the
installed package). Only fields discord.py reads, or that tests may want to assert on, are filled.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import discord

if TYPE_CHECKING:  # pragma: no cover
    from .guilds import FakeMember
    from .server import FakeDiscord

DISCORD_EPOCH_MS = 1420070400000

# Permission bits, taken from discord.py so they cannot drift from what the client checks.
ALL_PERMISSIONS = discord.Permissions.all().value
ADMINISTRATOR = discord.Permissions(administrator=True).value
VIEW_CHANNEL = discord.Permissions(view_channel=True).value
SEND_MESSAGES = discord.Permissions(send_messages=True).value
ATTACH_FILES = discord.Permissions(attach_files=True).value
EMBED_LINKS = discord.Permissions(embed_links=True).value
MANAGE_MESSAGES = discord.Permissions(manage_messages=True).value
MANAGE_ROLES = discord.Permissions(manage_roles=True).value

# What @everyone gets in a new guild (roughly Discord's default for a new server).
DEFAULT_EVERYONE_PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    read_message_history=True,
    embed_links=True,
    attach_files=True,
    add_reactions=True,
    use_application_commands=True,
    use_external_emojis=True,
    create_instant_invite=True,
    change_nickname=True,
    connect=True,
    speak=True,
).value

# What the bot's managed role gets when the fake "invites" it (a typical invite URL scope).
DEFAULT_BOT_PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    read_message_history=True,
    embed_links=True,
    attach_files=True,
    add_reactions=True,
    use_external_emojis=True,
    manage_messages=True,
).value

DEFAULT_UPLOAD_LIMIT = 10 * 1024 * 1024  # Discord's default per-file limit for unboosted guilds (2025)

# Message flags
FLAG_EPHEMERAL = 1 << 6
FLAG_LOADING = 1 << 7

# Channel types
TEXT = 0
VOICE = 2
CATEGORY = 4


class SnowflakeGenerator:
    """Monotonic snowflakes with a real timestamp, so discord.py's created_at values make sense."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            value = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
            self._last = max(value, self._last + 1)
            return self._last

    def on_shard(self, shard_id: int, shard_count: int) -> int:
        """The next snowflake whose shard, (id >> 22) % shard_count, is shard_id: its timestamp is
        up to shard_count - 1 ms ahead of now."""
        with self._lock:
            value = max((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22, self._last + 1)
            stamp = value >> 22
            self._last = max(value, (stamp + (shard_id - stamp) % shard_count) << 22)
            return self._last


def iso_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


def as_int(value: Any) -> int:
    """Accept a permission/flag as int, discord.Permissions or anything with `.value`."""
    if value is None:
        return 0
    return int(getattr(value, "value", value))


@dataclass(eq=False)
class FakeUser:
    id: int
    username: str
    global_name: str | None = None
    bot: bool = False
    avatar: str | None = None

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "username": self.username,
            "discriminator": "0",
            "global_name": self.global_name,
            "avatar": self.avatar,
            "bot": self.bot,
            "public_flags": 0,
        }

    @property
    def mention(self) -> str:
        return f"<@{self.id}>"


@dataclass(eq=False)
class FakeRole:
    id: int
    guild_id: int
    name: str
    permissions: int = 0
    position: int = 0
    color: int = 0
    hoist: bool = False
    mentionable: bool = False
    managed: bool = False
    bot_id: int | None = None  # set for the bot's managed integration role

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.id),
            "name": self.name,
            "permissions": str(self.permissions),
            "position": self.position,
            "color": self.color,
            "colors": {"primary_color": self.color, "secondary_color": None, "tertiary_color": None},
            "hoist": self.hoist,
            "mentionable": self.mentionable,
            "managed": self.managed,
            "icon": None,
            "unicode_emoji": None,
            "flags": 0,
        }
        if self.bot_id is not None:
            data["tags"] = {"bot_id": str(self.bot_id)}
        return data

    @property
    def mention(self) -> str:
        return f"<@&{self.id}>"


@dataclass(eq=False)
class FakeChannel:
    id: int
    guild_id: int
    name: str
    type: int = TEXT
    position: int = 0
    topic: str | None = None
    parent_id: int | None = None
    nsfw: bool = False
    # Discord's overwrite objects: {"id", "type" (0 role, 1 member), "allow", "deny"} with int bits.
    overwrites: list[dict[str, Any]] = field(default_factory=list)
    last_message_id: int | None = None
    _server: FakeDiscord | None = field(default=None, repr=False)

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "guild_id": str(self.guild_id),
            "type": self.type,
            "name": self.name,
            "position": self.position,
            "topic": self.topic,
            "nsfw": self.nsfw,
            "parent_id": str(self.parent_id) if self.parent_id else None,
            "rate_limit_per_user": 0,
            "last_message_id": str(self.last_message_id) if self.last_message_id else None,
            "permission_overwrites": [
                {"id": str(o["id"]), "type": o["type"], "allow": str(o["allow"]), "deny": str(o["deny"])}
                for o in self.overwrites
            ],
            "flags": 0,
        }

    def set_overwrite(self, target: FakeRole | FakeMember, *, allow: Any = 0, deny: Any = 0) -> None:
        """Set a permission overwrite for a role or member (replaces an existing one)."""
        kind = 0 if isinstance(target, FakeRole) else 1
        tid = target.id
        self.overwrites = [o for o in self.overwrites if o["id"] != tid]
        self.overwrites.append({"id": tid, "type": kind, "allow": as_int(allow), "deny": as_int(deny)})
        if self._server is not None:
            self._server._dispatch_guild_event(self.guild_id, "CHANNEL_UPDATE", self.payload())

    @property
    def mention(self) -> str:
        return f"<#{self.id}>"


@dataclass(eq=False)
class FakeAttachment:
    """A stored upload. `data` holds the exact bytes the client sent."""

    id: int
    filename: str
    data: bytes
    content_type: str | None = None
    description: str | None = None
    url: str = ""

    @property
    def size(self) -> int:
        return len(self.data)

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "filename": self.filename,
            "size": self.size,
            "url": self.url,
            "proxy_url": self.url,
            "content_type": self.content_type,
            "description": self.description,
        }


@dataclass(eq=False)
class FakeMessage:
    """A message as Discord stores it. `edits` keeps every PATCH body applied to it, in order."""

    id: int
    channel_id: int
    guild_id: int | None
    author: FakeUser
    content: str = ""
    embeds: list[dict[str, Any]] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[FakeAttachment] = field(default_factory=list)
    flags: int = 0
    tts: bool = False
    type: int = 0
    timestamp: str = field(default_factory=iso_now)
    edited_timestamp: str | None = None
    webhook_id: int | None = None
    application_id: int | None = None
    interaction_metadata: dict[str, Any] | None = None
    message_reference: dict[str, Any] | None = None
    mentions: list[FakeUser] = field(default_factory=list)  # parsed from <@id> in content
    mention_roles: list[int] = field(default_factory=list)  # parsed from <@&id>
    edits: list[dict[str, Any]] = field(default_factory=list)
    deleted: bool = False
    source: str = ""  # "channel", "interaction_response", "followup", "user"

    @property
    def edit_count(self) -> int:
        return len(self.edits)

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & FLAG_EPHEMERAL)

    @property
    def loading(self) -> bool:
        """True for a deferred ("thinking") response that has not been edited yet."""
        return bool(self.flags & FLAG_LOADING)

    def iter_components(self) -> Iterator[dict[str, Any]]:
        """Every component, flattened through action rows, sections, containers and labels."""
        yield from _walk_components(self.components)

    @property
    def custom_ids(self) -> list[str]:
        return [c["custom_id"] for c in self.iter_components() if "custom_id" in c]

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.id),
            "channel_id": str(self.channel_id),
            "author": self.author.payload(),
            "content": self.content,
            "timestamp": self.timestamp,
            "edited_timestamp": self.edited_timestamp,
            "tts": self.tts,
            "mention_everyone": "@everyone" in self.content or "@here" in self.content,
            "mentions": [u.payload() for u in self.mentions],
            "mention_roles": [str(r) for r in self.mention_roles],
            "attachments": [a.payload() for a in self.attachments],
            "embeds": self.embeds,
            "components": self.components,
            "pinned": False,
            "type": self.type,
            "flags": self.flags,
        }
        if self.webhook_id is not None:
            data["webhook_id"] = str(self.webhook_id)
        if self.application_id is not None:
            data["application_id"] = str(self.application_id)
        if self.interaction_metadata is not None:
            data["interaction_metadata"] = self.interaction_metadata
        if self.message_reference is not None:
            data["message_reference"] = self.message_reference
        return data

    def __repr__(self) -> str:
        extra = f" files={[a.filename for a in self.attachments]}" if self.attachments else ""
        return (
            f"<FakeMessage id={self.id} channel={self.channel_id} author={self.author.username!r} "
            f"content={self.content!r} embeds={len(self.embeds)} edits={self.edit_count} "
            f"flags={self.flags}{extra}{' deleted' if self.deleted else ''}>"
        )


def _walk_components(components: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for comp in components or ():
        yield comp
        yield from _walk_components(comp.get("components") or ())
        for key in ("component", "accessory"):
            if isinstance(comp.get(key), dict):
                yield from _walk_components([comp[key]])


@dataclass
class RecordedRequest:
    """One HTTP request the client made, as the fake received it."""

    method: str
    path: str  # relative to /api/v10, e.g. "/channels/123/messages"
    route: str | None  # matched template, e.g. "/channels/{channel_id}/messages"; None if unknown
    params: dict[str, str]  # route parameters
    query: dict[str, str]
    json: Any  # JSON body, or the decoded payload_json of a multipart body
    files: list[FakeAttachment]
    headers: dict[str, str]
    status: int = 0  # filled once answered
    response: Any = None
    at: float = field(default_factory=time.monotonic)

    def __repr__(self) -> str:
        files = f" files={[f.filename for f in self.files]}" if self.files else ""
        return f"<{self.method} {self.path} -> {self.status}{files}>"


_counter = itertools.count(1)


def next_token() -> str:
    return f"fake-interaction-token-{next(_counter)}-{int(time.time() * 1000)}"
