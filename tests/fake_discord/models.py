"""State objects of the fake Discord server and their JSON payloads.

Payload shapes follow Discord's API v10 as discord.py 2.7 parses them (see discord/types/ in the
installed package). Only fields discord.py reads, or that tests may want to assert on, are filled.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Union

import discord

if TYPE_CHECKING:  # pragma: no cover
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
DM = 1
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


def iso_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat()


def as_int(value: Any) -> int:
    """Accept a permission/flag as int, discord.Permissions or anything with `.value`."""
    if value is None:
        return 0
    return int(getattr(value, "value", value))


def _id(obj: Any) -> int:
    return int(getattr(obj, "id", obj))


@dataclass(eq=False)
class FakeUser:
    id: int
    username: str
    global_name: Optional[str] = None
    bot: bool = False
    avatar: Optional[str] = None

    def payload(self) -> Dict[str, Any]:
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
    bot_id: Optional[int] = None  # set for the bot's managed integration role

    def payload(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {
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
    guild_id: Optional[int]
    name: Optional[str]
    type: int = TEXT
    position: int = 0
    topic: Optional[str] = None
    parent_id: Optional[int] = None
    nsfw: bool = False
    # Discord's overwrite objects: {"id", "type" (0 role, 1 member), "allow", "deny"} with int bits.
    overwrites: List[Dict[str, Any]] = field(default_factory=list)
    recipients: List[FakeUser] = field(default_factory=list)  # DMs only
    last_message_id: Optional[int] = None
    _server: Optional["FakeDiscord"] = field(default=None, repr=False)

    def payload(self) -> Dict[str, Any]:
        if self.type == DM:
            return {
                "id": str(self.id),
                "type": DM,
                "last_message_id": str(self.last_message_id) if self.last_message_id else None,
                "recipients": [u.payload() for u in self.recipients],
            }
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

    def set_overwrite(self, target: Union["FakeRole", "FakeMember"], *, allow: Any = 0, deny: Any = 0) -> None:
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
class FakeMember:
    user: FakeUser
    guild_id: int
    roles: List[int] = field(default_factory=list)  # role ids, never @everyone
    nick: Optional[str] = None
    joined_at: str = field(default_factory=iso_now)
    _server: Optional["FakeDiscord"] = field(default=None, repr=False)

    @property
    def id(self) -> int:
        return self.user.id

    @property
    def mention(self) -> str:
        return self.user.mention

    def payload(self, *, permissions: Optional[int] = None, with_user: bool = True) -> Dict[str, Any]:
        data: Dict[str, Any] = {
            "roles": [str(r) for r in self.roles],
            "nick": self.nick,
            "avatar": None,
            "joined_at": self.joined_at,
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "pending": False,
            "communication_disabled_until": None,
        }
        if with_user:
            data["user"] = self.user.payload()
        if permissions is not None:
            data["permissions"] = str(permissions)
        return data

    def add_role(self, role: "FakeRole") -> None:
        """Give the member a role; a connected client gets GUILD_MEMBER_UPDATE (members intent)."""
        if role.id not in self.roles:
            self.roles.append(role.id)
            self._member_updated()

    def remove_role(self, role: "FakeRole") -> None:
        if role.id in self.roles:
            self.roles.remove(role.id)
            self._member_updated()

    def _member_updated(self) -> None:
        if self._server is not None:
            data = self.payload()
            data["guild_id"] = str(self.guild_id)
            self._server._dispatch_guild_event(self.guild_id, "GUILD_MEMBER_UPDATE", data, intent=1 << 1)


@dataclass(eq=False)
class FakeGuild:
    id: int
    name: str
    owner_id: int
    upload_limit: int = DEFAULT_UPLOAD_LIMIT
    locale: str = "en-US"
    roles: Dict[int, FakeRole] = field(default_factory=dict)
    channels: Dict[int, FakeChannel] = field(default_factory=dict)
    members: Dict[int, FakeMember] = field(default_factory=dict)
    joined_at: str = field(default_factory=iso_now)
    _server: Optional["FakeDiscord"] = field(default=None, repr=False)

    # -- test-facing builders ------------------------------------------------------------------

    @property
    def everyone(self) -> FakeRole:
        return self.roles[self.id]

    @property
    def owner(self) -> FakeMember:
        return self.members[self.owner_id]

    @property
    def me(self) -> FakeMember:
        assert self._server is not None
        return self.members[self._server.bot_user.id]

    def create_text_channel(
        self, name: str, *, topic: Optional[str] = None, category: Optional[FakeChannel] = None
    ) -> FakeChannel:
        """Add a text channel (CHANNEL_CREATE reaches a connected client)."""
        return self._add_channel(name, TEXT, topic=topic, parent_id=category.id if category else None)

    def create_category(self, name: str) -> FakeChannel:
        return self._add_channel(name, CATEGORY)

    def create_voice_channel(self, name: str) -> FakeChannel:
        return self._add_channel(name, VOICE)

    def _add_channel(self, name: str, kind: int, **kw: Any) -> FakeChannel:
        assert self._server is not None
        ch = FakeChannel(
            id=self._server.snowflake(),
            guild_id=self.id,
            name=name,
            type=kind,
            position=len(self.channels),
            _server=self._server,
            **kw,
        )
        self.channels[ch.id] = ch
        self._server._channels[ch.id] = ch
        self._server._dispatch_guild_event(self.id, "CHANNEL_CREATE", ch.payload())
        return ch

    def create_role(
        self, name: str, *, permissions: Any = 0, color: int = 0, hoist: bool = False, mentionable: bool = False
    ) -> FakeRole:
        """Add a role; `permissions` is an int or discord.Permissions."""
        assert self._server is not None
        role = FakeRole(
            id=self._server.snowflake(),
            guild_id=self.id,
            name=name,
            permissions=as_int(permissions),
            position=len(self.roles),
            color=color,
            hoist=hoist,
            mentionable=mentionable,
        )
        self.roles[role.id] = role
        self._server._dispatch_guild_event(
            self.id, "GUILD_ROLE_CREATE", {"guild_id": str(self.id), "role": role.payload()}
        )
        return role

    def create_member(
        self,
        name: str,
        *,
        roles: Iterable[FakeRole] = (),
        nick: Optional[str] = None,
        bot: bool = False,
        global_name: Optional[str] = None,
    ) -> FakeMember:
        """Create a new user and add them to this guild."""
        assert self._server is not None
        user = self._server.create_user(name, bot=bot, global_name=global_name)
        return self.add_member(user, roles=roles, nick=nick)

    def add_member(self, user: FakeUser, *, roles: Iterable[FakeRole] = (), nick: Optional[str] = None) -> FakeMember:
        """Add an existing user (e.g. one who is in another guild too)."""
        member = FakeMember(user=user, guild_id=self.id, roles=[r.id for r in roles], nick=nick, _server=self._server)
        self.members[user.id] = member
        if self._server is not None:
            data = member.payload()
            data["guild_id"] = str(self.id)
            self._server._dispatch_guild_event(self.id, "GUILD_MEMBER_ADD", data, intent=1 << 1)
        return member

    def edit_role(self, role: FakeRole, *, name: Optional[str] = None, permissions: Any = None) -> FakeRole:
        """Change a role (GUILD_ROLE_UPDATE reaches a connected client, so its permission cache follows)."""
        if name is not None:
            role.name = name
        if permissions is not None:
            role.permissions = as_int(permissions)
        if self._server is not None:
            self._server._dispatch_guild_event(
                self.id, "GUILD_ROLE_UPDATE", {"guild_id": str(self.id), "role": role.payload()}
            )
        return role

    def remove_member(self, member: FakeMember) -> None:
        """The member leaves (GUILD_MEMBER_REMOVE with the members intent)."""
        self.members.pop(member.id, None)
        if self._server is not None:
            data = {"guild_id": str(self.id), "user": member.user.payload()}
            self._server._dispatch_guild_event(self.id, "GUILD_MEMBER_REMOVE", data, intent=1 << 1)

    def channel(self, name: str) -> FakeChannel:
        """Look up a channel by name."""
        for ch in self.channels.values():
            if ch.name == name:
                return ch
        raise KeyError(name)

    def role(self, name: str) -> FakeRole:
        for role in self.roles.values():
            if role.name == name:
                return role
        raise KeyError(name)

    def member(self, name: str) -> FakeMember:
        for m in self.members.values():
            if m.user.username == name:
                return m
        raise KeyError(name)

    # -- permissions (Discord's documented algorithm) ------------------------------------------

    def base_permissions(self, member: FakeMember) -> int:
        if member.id == self.owner_id:
            return ALL_PERMISSIONS
        perms = self.everyone.permissions
        for rid in member.roles:
            role = self.roles.get(rid)
            if role is not None:
                perms |= role.permissions
        if perms & ADMINISTRATOR:
            return ALL_PERMISSIONS
        return perms

    def permissions_in(self, member: FakeMember, channel: Optional[FakeChannel]) -> int:
        perms = self.base_permissions(member)
        if perms & ADMINISTRATOR or channel is None:
            return perms
        overwrites = {o["id"]: o for o in channel.overwrites}
        everyone = overwrites.get(self.id)
        if everyone:
            perms = (perms & ~everyone["deny"]) | everyone["allow"]
        allow = deny = 0
        for rid in member.roles:
            o = overwrites.get(rid)
            if o and o["type"] == 0:
                allow |= o["allow"]
                deny |= o["deny"]
        perms = (perms & ~deny) | allow
        o = overwrites.get(member.id)
        if o and o["type"] == 1:
            perms = (perms & ~o["deny"]) | o["allow"]
        return perms

    # -- payloads ------------------------------------------------------------------------------

    def payload(self) -> Dict[str, Any]:
        """The REST guild object."""
        return {
            "id": str(self.id),
            "name": self.name,
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": str(self.owner_id),
            "region": None,
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "roles": [r.payload() for r in self.roles.values()],
            "emojis": [],
            "stickers": [],
            "features": [],
            "mfa_level": 0,
            "system_channel_id": None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "public_updates_channel_id": None,
            "safety_alerts_channel_id": None,
            "vanity_url_code": None,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "preferred_locale": self.locale,
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
        }

    def gateway_payload(self, *, include_all_members: bool) -> Dict[str, Any]:
        """GUILD_CREATE data. Without the members intent Discord sends only the bot's own member."""
        data = self.payload()
        me_id = self._server.bot_user.id if self._server else None
        members = [m for m in self.members.values() if include_all_members or m.id == me_id]
        data.update(
            joined_at=self.joined_at,
            large=len(self.members) >= 250,
            unavailable=False,
            member_count=len(self.members),
            members=[m.payload() for m in members],
            channels=[c.payload() for c in self.channels.values()],
            threads=[],
            presences=[],
            voice_states=[],
            stage_instances=[],
            guild_scheduled_events=[],
            soundboard_sounds=[],
        )
        return data


@dataclass(eq=False)
class FakeAttachment:
    """A stored upload. `data` holds the exact bytes the client sent."""

    id: int
    filename: str
    data: bytes
    content_type: Optional[str] = None
    description: Optional[str] = None
    url: str = ""

    @property
    def size(self) -> int:
        return len(self.data)

    def payload(self) -> Dict[str, Any]:
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
    guild_id: Optional[int]
    author: FakeUser
    content: str = ""
    embeds: List[Dict[str, Any]] = field(default_factory=list)
    components: List[Dict[str, Any]] = field(default_factory=list)
    attachments: List[FakeAttachment] = field(default_factory=list)
    flags: int = 0
    tts: bool = False
    type: int = 0
    timestamp: str = field(default_factory=iso_now)
    edited_timestamp: Optional[str] = None
    webhook_id: Optional[int] = None
    application_id: Optional[int] = None
    interaction_metadata: Optional[Dict[str, Any]] = None
    message_reference: Optional[Dict[str, Any]] = None
    reactions: Dict[str, int] = field(default_factory=dict)
    mentions: List[FakeUser] = field(default_factory=list)  # parsed from <@id> in content
    mention_roles: List[int] = field(default_factory=list)  # parsed from <@&id>
    edits: List[Dict[str, Any]] = field(default_factory=list)
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

    def iter_components(self) -> Iterator[Dict[str, Any]]:
        """Every component, flattened through action rows, sections, containers and labels."""
        yield from _walk_components(self.components)

    @property
    def custom_ids(self) -> List[str]:
        return [c["custom_id"] for c in self.iter_components() if "custom_id" in c]

    def payload(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {
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
            "reactions": [
                {"emoji": {"id": None, "name": e}, "count": n, "me": True, "count_details": {"burst": 0, "normal": n}}
                for e, n in self.reactions.items()
            ],
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


def _walk_components(components: Iterable[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
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
    route: Optional[str]  # matched template, e.g. "/channels/{channel_id}/messages"; None if unknown
    params: Dict[str, str]  # route parameters
    query: Dict[str, str]
    json: Any  # JSON body, or the decoded payload_json of a multipart body
    files: List[FakeAttachment]
    headers: Dict[str, str]
    status: int = 0  # filled once answered
    response: Any = None
    at: float = field(default_factory=time.monotonic)

    def __repr__(self) -> str:
        files = f" files={[f.filename for f in self.files]}" if self.files else ""
        return f"<{self.method} {self.path} -> {self.status}{files}>"


_ROUTE_PARAM = re.compile(r"\{(\w+)\}")


def compile_route(template: str) -> "re.Pattern[str]":
    escaped = re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
    pattern = _ROUTE_PARAM.sub(lambda m: f"(?P<{m.group(1)}>[^/]+)", escaped)
    return re.compile(f"^{pattern}$")


_counter = itertools.count(1)


def next_token() -> str:
    return f"fake-interaction-token-{next(_counter)}-{int(time.time() * 1000)}"
