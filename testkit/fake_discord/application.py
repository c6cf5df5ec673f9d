"""The application: what discord.py asks at login (the bot user, the application, the gateway URL),
its command definitions (tree.sync, checked like Discord does), and turning a test's
slash(..., "group sub", {options}) into the interaction data Discord would send for them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from . import interactions as it
from .errors import ApiError, invalid_form
from .guilds import FakeGuild, FakeMember
from .models import FakeAttachment, FakeChannel, FakeMessage, FakeRole, FakeUser
from .rest import Reply, route

if TYPE_CHECKING:  # pragma: no cover
    from .models import RecordedRequest
    from .server import FakeDiscord

Command = dict[str, Any]
GROUPS = (it.SUB_COMMAND, it.SUB_COMMAND_GROUP)


class ApplicationMixin:
    """FakeDiscord's login routes and application commands."""

    # -- inspection (test-facing) ------------------------------------------------------------------

    def commands(self: FakeDiscord, guild: FakeGuild | None = None) -> list[Command]:
        """Application commands as last synced (global, or for one guild)."""
        return self.global_commands if guild is None else self.guild_commands.get(guild.id, [])

    def command(self: FakeDiscord, name: str, guild: FakeGuild | None = None) -> Command:
        for cmd in self.commands(guild):
            if cmd["name"] == name:
                return cmd
        raise KeyError(name)

    # -- login ---------------------------------------------------------------------------------

    def bot_user_payload(self: FakeDiscord) -> dict[str, Any]:
        return dict(self.bot_user.payload(), verified=True, mfa_enabled=False, flags=0, email=None, locale="en-US")

    @route("GET", "/users/@me")
    async def _get_me(self: FakeDiscord, rec: RecordedRequest) -> Reply:
        return 200, self.bot_user_payload()

    @route("GET", "/oauth2/applications/@me")
    async def _get_application(self: FakeDiscord, rec: RecordedRequest) -> Reply:
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

    @route("GET", "/gateway/bot")
    async def _get_gateway_bot(self: FakeDiscord, rec: RecordedRequest) -> Reply:
        return 200, {
            "url": self.gateway_url,
            "shards": self.gateway.recommended_shards,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
        }

    # -- tree.sync -----------------------------------------------------------------------------

    @route("PUT", "/applications/{application_id}/commands")
    @route("PUT", "/applications/{application_id}/guilds/{guild_id}/commands")
    async def _put_commands(
        self: FakeDiscord, rec: RecordedRequest, application_id: str, guild_id: str | None = None
    ) -> Reply:
        if application_id != str(self.application_id):
            raise ApiError(403, 50001, "Missing Access")
        if guild_id is None:
            store = self.global_commands
        elif guild_id.isdigit() and int(guild_id) in self.guilds:
            store = self.guild_commands.setdefault(int(guild_id), [])
        else:
            raise ApiError(404, 10004, "Unknown Guild")
        new = [self._stored_command(c, guild_id, store) for c in rec.json or []]
        names = [(c["name"], c["type"]) for c in new]
        if len(set(names)) != len(names):
            raise invalid_form("", "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique")
        for ctype, what in ((it.USER_COMMAND, "user"), (it.MESSAGE_COMMAND, "message")):
            if sum(c["type"] == ctype for c in new) > 5:  # Discord: at most 5 of each context-menu kind
                raise invalid_form("", "APPLICATION_COMMANDS_TOO_MANY", f"Maximum number of {what} commands reached (5)")
        store[:] = new
        return 200, new

    def _stored_command(self: FakeDiscord, cmd: Command, guild_id: str | None, existing: list[Command]) -> Command:
        check_command(cmd)
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

    # -- invoking a synced command -------------------------------------------------------------

    def _command_data(
        self: FakeDiscord,
        guild: FakeGuild,
        command: str,
        options: dict[str, Any],
        *,
        focused: str | None,
        require_synced: bool,
    ) -> dict[str, Any]:
        """The interaction `data` for "name [group] [sub]" with options, as the Discord client builds it."""
        names = command.split()
        top = _find_chat_command(self.guild_commands.get(guild.id, []), names[0])
        guild_scoped = top is not None
        top = top or _find_chat_command(self.global_commands, names[0])
        if top is None and require_synced:
            synced = [c["name"] for c in self.global_commands + self.guild_commands.get(guild.id, [])]
            raise LookupError(f"command {names[0]!r} was never synced (synced: {synced}); call tree.sync() first")

        resolved: dict[str, dict[str, Any]] = {}
        root: list[dict[str, Any]] = []
        current = root
        defs: list[dict[str, Any]] | None = top.get("options", []) if top else None
        for depth, sub in enumerate(names[1:]):
            if defs is not None:
                sub_def = next((o for o in defs if o["name"] == sub and o["type"] in GROUPS), None)
                if sub_def is None:
                    raise LookupError(f"{command!r}: no subcommand {sub!r}; options are {[o['name'] for o in defs]}")
                kind = sub_def["type"]
                defs = sub_def.get("options", [])
            else:
                kind = it.SUB_COMMAND if depth == len(names) - 2 else it.SUB_COMMAND_GROUP
            node: dict[str, Any] = {"name": sub, "type": kind, "options": []}
            current.append(node)
            current = node["options"]

        if defs is not None and any(o["type"] in GROUPS for o in defs):
            subs = [o["name"] for o in defs if o["type"] in GROUPS]
            raise LookupError(f"{command!r} is a group: name one of its subcommands {subs}")

        for name, value in options.items():
            if defs is not None:
                opt_def = next((o for o in defs if o["name"] == name and o["type"] not in GROUPS), None)
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
            node = {"name": name, "type": kind, "value": option_value(kind, value, resolved, guild)}
            if opt_def is not None:
                check_option_limits(opt_def, node["value"])
            current.append(node)
        if focused is None and defs is not None:
            missing = [o["name"] for o in defs if o.get("required") and o["name"] not in options]
            if missing:
                raise ValueError(f"{command!r} is missing required options {missing}")
        if focused is not None and focused not in options:
            raise ValueError(f"focused option {focused!r} must be given in options")

        data: dict[str, Any] = {"id": str(top["id"]) if top else str(self.snowflake()), "name": names[0], "type": 1}
        if root:
            data["options"] = root
        if resolved:
            data["resolved"] = resolved
        if guild_scoped:
            data["guild_id"] = str(guild.id)
        return data


    def _message_command_data(self: FakeDiscord, guild: FakeGuild, name: str, msg: FakeMessage) -> dict[str, Any]:
        """The interaction `data` of a synced message command run on `msg`."""
        synced = self.guild_commands.get(guild.id, []) + self.global_commands
        cmd = next((c for c in synced if c["name"] == name and c.get("type") == it.MESSAGE_COMMAND), None)
        if cmd is None:
            raise LookupError(f"no message command {name!r} was synced: {[c['name'] for c in synced if c.get('type') == 3]}")
        data: dict[str, Any] = {
            "id": str(cmd["id"]),
            "name": name,
            "type": it.MESSAGE_COMMAND,
            "target_id": str(msg.id),
            "resolved": {"messages": {str(msg.id): msg.payload()}},
        }
        if "guild_id" in cmd:
            data["guild_id"] = cmd["guild_id"]
        return data


def _find_chat_command(commands: list[Command], name: str) -> Command | None:
    return next((c for c in commands if c["name"] == name and c.get("type", 1) == 1), None)


def check_command(cmd: Command) -> None:
    """A few of Discord's checks, so a bad definition fails in tests as it would in production."""
    ctype = cmd.get("type", 1)
    name = cmd.get("name", "")
    if not (1 <= len(name) <= 32) or (ctype == 1 and (not re.fullmatch(r"[-_\w]+", name) or name != name.lower())):
        raise invalid_form("name", "APPLICATION_COMMAND_INVALID_NAME", f"Command name is invalid: {name!r}")
    if ctype == 1 and not (1 <= len(cmd.get("description", "")) <= 100):
        raise invalid_form("description", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
    _check_options(cmd.get("options") or [], "options")


def _check_options(options: list[dict[str, Any]], where: str) -> None:
    if len(options) > 25:
        raise invalid_form(where, "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
    seen_optional = False
    for o in options:
        here = f"{where}.{o['name']}"
        if o["type"] in GROUPS:
            _check_options(o.get("options", []), f"{here}.options")
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
            raise invalid_form(f"{here}.description", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")


def check_option_limits(opt_def: dict[str, Any], value: Any) -> None:
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


def infer_option_type(value: Any) -> int:
    """Option type for an unsynced command, from the Python value."""
    kinds = [
        (bool, it.BOOLEAN),  # before int: a bool is an int
        (int, it.INTEGER),
        (float, it.NUMBER),
        ((FakeMember, FakeUser), it.USER),
        (FakeChannel, it.CHANNEL),
        (FakeRole, it.ROLE),
        (FakeAttachment, it.ATTACHMENT),
    ]
    return next((kind for types, kind in kinds if isinstance(value, types)), it.STRING)


def option_value(kind: int, value: Any, resolved: dict[str, dict[str, Any]], guild: FakeGuild) -> Any:
    """An option's wire value; users, members, roles, channels and attachments also go into `resolved`."""
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
        member = value if isinstance(value, FakeMember) else guild.members.get(user.id)
        if member is not None:
            resolved.setdefault("members", {})[str(user.id)] = member.payload(
                with_user=False, permissions=guild.base_permissions(member)
            )
        return str(user.id)
    if kind in (it.ROLE, it.MENTIONABLE) and isinstance(value, FakeRole):
        resolved.setdefault("roles", {})[str(value.id)] = value.payload()
        return str(value.id)
    if kind == it.CHANNEL and isinstance(value, FakeChannel):
        data = dict(value.payload(), permissions=str(guild.permissions_in(guild.me, value)))
        resolved.setdefault("channels", {})[str(value.id)] = data
        return str(value.id)
    if kind == it.ATTACHMENT and isinstance(value, FakeAttachment):
        resolved.setdefault("attachments", {})[str(value.id)] = value.payload()
        return str(value.id)
    raise TypeError(f"cannot send {value!r} as option type {kind}")
