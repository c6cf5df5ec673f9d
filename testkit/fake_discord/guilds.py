"""Guilds and members: the world a test builds, Discord's permission algorithm, and the gateway
events a connected client gets when the world changes (GUILD_CREATE, CHANNEL_*, GUILD_ROLE_*,
GUILD_MEMBER_*)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .gateway import INTENT_GUILD_MEMBERS, GatewaySession
from .models import (
    ADMINISTRATOR,
    ALL_PERMISSIONS,
    CATEGORY,
    DEFAULT_BOT_PERMISSIONS,
    DEFAULT_EVERYONE_PERMISSIONS,
    DEFAULT_UPLOAD_LIMIT,
    TEXT,
    VOICE,
    FakeChannel,
    FakeRole,
    FakeUser,
    as_int,
    iso_now,
)

if TYPE_CHECKING:  # pragma: no cover
    from .server import FakeDiscord


@dataclass(eq=False)
class FakeMember:
    user: FakeUser
    guild_id: int
    roles: list[int] = field(default_factory=list)  # role ids, never @everyone
    nick: str | None = None
    joined_at: str = field(default_factory=iso_now)
    _server: FakeDiscord | None = field(default=None, repr=False)

    @property
    def id(self) -> int:
        return self.user.id

    @property
    def mention(self) -> str:
        return self.user.mention

    def payload(self, *, permissions: int | None = None, with_user: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
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

    def add_role(self, role: FakeRole) -> None:
        """Give the member a role; a connected client gets GUILD_MEMBER_UPDATE (members intent)."""
        if role.id not in self.roles:
            self.roles.append(role.id)
            self._member_updated()

    def remove_role(self, role: FakeRole) -> None:
        if role.id in self.roles:
            self.roles.remove(role.id)
            self._member_updated()

    def _member_updated(self) -> None:
        if self._server is not None:
            data = self.payload()
            data["guild_id"] = str(self.guild_id)
            self._server._dispatch_guild_event(self.guild_id, "GUILD_MEMBER_UPDATE", data, intent=INTENT_GUILD_MEMBERS)


@dataclass(eq=False)
class FakeGuild:
    id: int
    name: str
    owner_id: int
    upload_limit: int = DEFAULT_UPLOAD_LIMIT
    locale: str = "en-US"
    roles: dict[int, FakeRole] = field(default_factory=dict)
    channels: dict[int, FakeChannel] = field(default_factory=dict)
    members: dict[int, FakeMember] = field(default_factory=dict)
    joined_at: str = field(default_factory=iso_now)
    _server: FakeDiscord | None = field(default=None, repr=False)

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
        self, name: str, *, topic: str | None = None, category: FakeChannel | None = None
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
        nick: str | None = None,
        bot: bool = False,
        global_name: str | None = None,
    ) -> FakeMember:
        """Create a new user and add them to this guild."""
        assert self._server is not None
        user = self._server.create_user(name, bot=bot, global_name=global_name)
        return self.add_member(user, roles=roles, nick=nick)

    def add_member(self, user: FakeUser, *, roles: Iterable[FakeRole] = (), nick: str | None = None) -> FakeMember:
        """Add an existing user (e.g. one who is in another guild too)."""
        member = FakeMember(user=user, guild_id=self.id, roles=[r.id for r in roles], nick=nick, _server=self._server)
        self.members[user.id] = member
        if self._server is not None:
            data = member.payload()
            data["guild_id"] = str(self.id)
            self._server._dispatch_guild_event(self.id, "GUILD_MEMBER_ADD", data, intent=INTENT_GUILD_MEMBERS)
        return member

    def edit_role(self, role: FakeRole, *, name: str | None = None, permissions: Any = None) -> FakeRole:
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
            self._server._dispatch_guild_event(self.id, "GUILD_MEMBER_REMOVE", data, intent=INTENT_GUILD_MEMBERS)

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

    def permissions_in(self, member: FakeMember, channel: FakeChannel | None) -> int:
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

    def payload(self) -> dict[str, Any]:
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

    def gateway_payload(self, *, include_all_members: bool) -> dict[str, Any]:
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


class GuildsMixin:
    """FakeDiscord's world building (test-facing) and the guild events it dispatches."""

    def create_user(
        self: FakeDiscord, name: str, *, bot: bool = False, global_name: str | None = None
    ) -> FakeUser:
        user = FakeUser(id=self.snowflake(), username=name, bot=bot, global_name=global_name)
        self.users[user.id] = user
        return user

    def create_guild(
        self: FakeDiscord,
        name: str = "Test Guild",
        *,
        owner: FakeUser | None = None,
        upload_limit: int | None = None,
        everyone_permissions: Any = DEFAULT_EVERYONE_PERMISSIONS,
        bot_permissions: Any = DEFAULT_BOT_PERMISSIONS,
        locale: str = "en-US",
        shard: tuple[int, int] | None = None,
    ) -> FakeGuild:
        """A guild with @everyone, the bot (with a managed role) and an owner member.
        shard=(shard_id, shard_count): an id that shard gets, (id >> 22) % shard_count == shard_id.

        Created after a client connected, it reaches the client as GUILD_CREATE ("bot joined").
        """
        owner = owner or self.create_user(f"{name.lower().replace(' ', '-')}-owner")
        guild = FakeGuild(
            id=self.snowflake() if shard is None else self.snowflake.on_shard(*shard),
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

    def remove_bot(self: FakeDiscord, guild: FakeGuild) -> None:
        """The bot is removed from `guild` (kicked, or the guild deleted): connected clients get
        GUILD_DELETE without `unavailable` (discord.py: on_guild_remove), and the guild is out of
        the world (a later IDENTIFY does not list it) until `add_bot`."""
        self.guilds.pop(guild.id, None)
        for session in self.gateway.live_sessions():
            session.dispatch("GUILD_DELETE", {"id": str(guild.id)})
        self._notify()

    def add_bot(self: FakeDiscord, guild: FakeGuild) -> None:
        """The bot is added back to a guild `remove_bot` took it out of: GUILD_CREATE (discord.py:
        on_guild_join: a join's GUILD_CREATE has no `unavailable`), members, channels and roles as
        they were."""
        self.guilds[guild.id] = guild
        for session in self.gateway.live_sessions():
            payload = self.guild_create_payload(guild, session)
            payload.pop("unavailable", None)
            session.dispatch("GUILD_CREATE", payload)
        self._notify()

    def guild_create_payload(self: FakeDiscord, guild: FakeGuild, session: GatewaySession) -> dict[str, Any]:
        return guild.gateway_payload(include_all_members=session.wants(INTENT_GUILD_MEMBERS))

    def _dispatch_guild_event(
        self: FakeDiscord, guild_id: int | None, event: str, data: Any, intent: int | None = None
    ) -> None:
        if guild_id is None or guild_id not in self.guilds:
            return  # guild still being built
        for session in self.gateway.live_sessions():
            if intent is None or session.wants(intent):
                session.dispatch(event, data)
        self._notify()
