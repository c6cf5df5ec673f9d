"""AutoMod rules: a guild's rules as a test builds them (keyword rules: keyword_filter,
regex_patterns, allow_list, exempt roles and channels), the REST route the bot reads them with
(`GET /guilds/{id}/auto-moderation/rules`, Manage Server needed: 403 / 50013 without it) and the
AUTO_MODERATION_RULE_CREATE/UPDATE/DELETE gateway events (intent AUTO_MODERATION_CONFIGURATION)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .errors import ApiError, unknown
from .guilds import FakeGuild
from .models import ADMINISTRATOR, FakeChannel, FakeRole, RecordedRequest
from .rest import Reply, route

if TYPE_CHECKING:  # pragma: no cover
    from .server import FakeDiscord

INTENT_AUTO_MODERATION_CONFIGURATION = 1 << 20
MANAGE_GUILD = 1 << 5
KEYWORD = 1  # trigger type
BLOCK_MESSAGE = 1  # action type


class AutoModMixin:
    """FakeDiscord's AutoMod rules: test-facing builders and the route that lists them."""

    @property
    def _server(self) -> FakeDiscord:
        return cast("FakeDiscord", self)

    def _automod(self, guild: FakeGuild) -> dict[int, dict[str, Any]]:
        store: dict[int, dict[int, dict[str, Any]]] = self.__dict__.setdefault("automod_rules", {})
        return store.setdefault(guild.id, {})

    def create_automod_rule(
        self,
        guild: FakeGuild,
        name: str,
        *,
        keywords: list[str] | None = None,
        regex: list[str] | None = None,
        allow: list[str] | None = None,
        enabled: bool = True,
        trigger_type: int = KEYWORD,
        exempt_roles: tuple[FakeRole, ...] = (),
        exempt_channels: tuple[FakeChannel, ...] = (),
    ) -> dict[str, Any]:
        """A rule as Discord stores it; a connected client gets AUTO_MODERATION_RULE_CREATE."""
        rule = {
            "id": str(self._server.snowflake()),
            "guild_id": str(guild.id),
            "name": name,
            "creator_id": str(guild.owner_id),
            "event_type": 1,
            "trigger_type": trigger_type,
            "trigger_metadata": {"keyword_filter": list(keywords or []), "regex_patterns": list(regex or []),
                                 "allow_list": list(allow or [])},
            "actions": [{"type": BLOCK_MESSAGE, "metadata": {}}],
            "enabled": enabled,
            "exempt_roles": [str(r.id) for r in exempt_roles],
            "exempt_channels": [str(c.id) for c in exempt_channels],
        }
        self._automod(guild)[int(rule["id"])] = rule
        self._server._dispatch_guild_event(guild.id, "AUTO_MODERATION_RULE_CREATE", rule, INTENT_AUTO_MODERATION_CONFIGURATION)
        return rule

    def edit_automod_rule(self, guild: FakeGuild, rule: dict[str, Any], *, keywords: list[str] | None = None,
                          allow: list[str] | None = None, enabled: bool | None = None) -> dict[str, Any]:
        """Change a rule; a connected client gets AUTO_MODERATION_RULE_UPDATE with the whole rule."""
        meta = rule["trigger_metadata"]
        if keywords is not None:
            meta["keyword_filter"] = list(keywords)
        if allow is not None:
            meta["allow_list"] = list(allow)
        if enabled is not None:
            rule["enabled"] = enabled
        self._server._dispatch_guild_event(guild.id, "AUTO_MODERATION_RULE_UPDATE", rule, INTENT_AUTO_MODERATION_CONFIGURATION)
        return rule

    def delete_automod_rule(self, guild: FakeGuild, rule: dict[str, Any]) -> None:
        """Remove a rule; a connected client gets AUTO_MODERATION_RULE_DELETE."""
        self._automod(guild).pop(int(rule["id"]), None)
        self._server._dispatch_guild_event(guild.id, "AUTO_MODERATION_RULE_DELETE", rule, INTENT_AUTO_MODERATION_CONFIGURATION)

    @route("GET", "/guilds/{guild_id}/auto-moderation/rules")
    async def _list_automod_rules(self, rec: RecordedRequest, guild_id: str) -> Reply:
        guild = self._server.guilds.get(int(guild_id)) if guild_id.isdigit() else None
        if guild is None:
            raise unknown("Guild", 10004)
        perms = guild.base_permissions(guild.me)
        if not perms & (MANAGE_GUILD | ADMINISTRATOR):
            raise ApiError(403, 50013, "Missing Permissions")
        return 200, list(self._automod(guild).values())
