"""Interactions: pushing slash commands, autocompletes and component clicks to the bot
(INTERACTION_CREATE), and the routes it answers them on: the callback, follow-ups and @original."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import interactions as it
from .errors import ApiError, FakeDiscordTimeout, invalid_form, unknown
from .guilds import FakeGuild, FakeMember
from .interactions import InteractionCallback, InteractionHandle
from .models import FLAG_EPHEMERAL, FLAG_LOADING, FakeChannel, FakeMessage, FakeUser, next_token
from .rest import Reply, route

if TYPE_CHECKING:  # pragma: no cover
    from .models import RecordedRequest
    from .server import FakeDiscord

WEBHOOK_MESSAGE = "/webhooks/{application_id}/{token}/messages/{message_id}"


class InteractionsMixin:
    """FakeDiscord's interactions."""

    # -- driving the bot (test-facing) -------------------------------------------------------------

    async def slash(
        self: FakeDiscord,
        guild: FakeGuild,
        channel: FakeChannel,
        member: FakeMember | FakeUser,
        command: str,
        options: Mapping[str, Any] | None = None,
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
        self: FakeDiscord,
        guild: FakeGuild,
        channel: FakeChannel,
        member: FakeMember | FakeUser,
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
        self: FakeDiscord,
        message: FakeMessage | int,
        member: FakeMember | FakeUser,
        custom_id: str,
        *,
        values: list[str] | None = None,
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
        data: dict[str, Any] = {"custom_id": custom_id, "component_type": comp["type"]}
        if values is not None or comp["type"] in (3, 5, 6, 7, 8):
            data["values"] = list(values or [])
        if "id" in comp:
            data["id"] = comp["id"]
        channel = self._channels[msg.channel_id]
        guild = self.guilds[channel.guild_id]
        return await self._push_interaction(it.MESSAGE_COMPONENT, guild, channel, member, data, message=msg)

    async def select(
        self: FakeDiscord,
        message: FakeMessage | int,
        member: FakeMember | FakeUser,
        custom_id: str,
        values: list[str],
    ) -> InteractionHandle:
        """Choose values in a string select menu."""
        return await self.click(message, member, custom_id, values=values)

    async def message_command(
        self: FakeDiscord,
        message: FakeMessage | int,
        member: FakeMember | FakeUser,
        name: str,
    ) -> InteractionHandle:
        """Run a message context-menu command (type 3, "Apps" on a message) on a stored message:
        the data carries `target_id` and the message in `resolved.messages`."""
        msg = self.messages[int(getattr(message, "id", message))]
        if msg.deleted:
            raise ValueError(f"message {msg.id} was deleted")
        channel = self._channels[msg.channel_id]
        guild = self.guilds[channel.guild_id]
        data = self._message_command_data(guild, name, msg)
        return await self._push_interaction(it.APPLICATION_COMMAND, guild, channel, member, data)

    async def _push_interaction(
        self: FakeDiscord,
        kind: int,
        guild: FakeGuild,
        channel: FakeChannel,
        member: FakeMember | FakeUser,
        data: dict[str, Any],
        *,
        message: FakeMessage | None = None,
        locale: str = "en-US",
    ) -> InteractionHandle:
        if channel.guild_id != guild.id:
            raise ValueError(f"channel {channel.name!r} is not in guild {guild.name!r}")
        if member.id not in guild.members:
            raise ValueError(f"{member!r} is not a member of guild {guild.name!r}")

        def shard_sessions():
            return self.gateway.guild_sessions(guild.id, connected=True)

        # A reconnect may be in flight (drop, op 7): give it session_wait seconds before failing.
        try:
            await self.wait_until(shard_sessions, self.session_wait, "a gateway connection")
        except FakeDiscordTimeout:
            raise RuntimeError(
                f"no gateway session for guild {guild.name!r}: start the client (and wait for READY) before pushing"
                " interactions; a sharded client gets only its shards' guilds"
            ) from None
        member = guild.members[member.id]
        perms = guild.permissions_in(member, channel)
        iid, token = self.snowflake(), next_token()
        payload: dict[str, Any] = {
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
            "guild_id": str(guild.id),
            "guild": {"id": str(guild.id), "locale": guild.locale, "features": []},
            "guild_locale": guild.locale,
            "channel": dict(channel.payload(), permissions=str(perms)),
            "member": member.payload(permissions=perms),
            "app_permissions": str(guild.permissions_in(guild.me, channel)),
            "authorizing_integration_owners": {"0": str(guild.id)},
            "context": 0,
            "attachment_size_limit": guild.upload_limit,
        }
        if message is not None:
            payload["message"] = message.payload()
        handle = InteractionHandle(
            server=self,
            id=iid,
            token=token,
            type=kind,
            payload=payload,
            guild_id=guild.id,
            channel=channel,
            user=member,
            source_message_id=message.id if message else None,
        )
        self.interactions[iid] = handle
        # Every connected session of the guild's shard gets it: one per shard for a well-run bot,
        # two (each answering, one of them too late) when a shard is connected twice.
        for session in shard_sessions():
            session.dispatch("INTERACTION_CREATE", payload)
        self._notify()
        return handle

    def _handle_by_token(self: FakeDiscord, app_id: str, token: str) -> InteractionHandle:
        if str(app_id) == str(self.application_id):
            for h in self.interactions.values():
                if h.token == token:
                    return h
        raise unknown("Webhook", 10015)

    # -- REST handlers -----------------------------------------------------------------------------

    @route("POST", "/interactions/{interaction_id}/{token}/callback", auth=False)
    async def _interaction_callback(
        self: FakeDiscord, rec: RecordedRequest, interaction_id: str, token: str
    ) -> Reply:
        h = self.interactions.get(int(interaction_id)) if interaction_id.isdigit() else None
        if h is None or h.token != token:
            raise unknown("interaction", 10062)
        if h.responded:
            raise ApiError(400, 40060, "Interaction has already been acknowledged.")
        delay = time.monotonic() - h.dispatched_at
        if self.interaction_ack_timeout is not None and delay > self.interaction_ack_timeout:
            raise unknown("interaction", 10062)  # what Discord answers to a late first response
        body = rec.json or {}
        kind = int(body.get("type", 0))
        data = body.get("data") or {}
        self._check_upload(rec.files, h.channel)
        message: FakeMessage | None = None

        def invalid(why: str) -> ApiError:
            return invalid_form("type", "INTERACTION_RESPONSE_TYPE_INVALID", why)

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
            if h.type != it.MESSAGE_COMPONENT:
                raise invalid("only component interactions can update a message")
            message = self.messages[h.source_message_id]  # type: ignore[index]
            h.original_id = message.id
            if kind == it.UPDATE_MESSAGE:
                self._edit_message(message, data, rec.files, via="interaction_update")
        elif kind == it.AUTOCOMPLETE_RESULT:
            if h.type != it.AUTOCOMPLETE:
                raise invalid("type 8 answers autocomplete interactions only")
            if len(data.get("choices") or []) > 25:
                raise invalid_form("data.choices", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
        else:  # PONG is for HTTP interactions; the fake has no modals (the bot sends none)
            raise invalid(f"response type {kind} is not supported")

        h.callbacks.append(
            InteractionCallback(type=kind, data=data, files=rec.files, request=rec, message=message, delay=delay)
        )
        self._notify()
        if rec.query.get("with_response") in (None, "0", "false", "False"):
            return 204, None
        result: dict[str, Any] = {"interaction": {"id": str(h.id), "type": h.type}}
        if message is not None:
            result["interaction"].update(
                response_message_id=str(message.id),
                response_message_loading=message.loading,
                response_message_ephemeral=message.ephemeral,
            )
            result["resource"] = {"type": kind, "message": message.payload()}
        elif kind == it.AUTOCOMPLETE_RESULT:
            result["resource"] = {"type": kind}
        return 200, result

    @route("POST", "/webhooks/{application_id}/{token}", auth=False)
    async def _followup(self: FakeDiscord, rec: RecordedRequest, application_id: str, token: str) -> Reply:
        h = self._handle_by_token(application_id, token)
        if not h.responded:
            raise unknown("Webhook", 10015)  # follow-ups need an acknowledged interaction
        self._check_upload(rec.files, h.channel)
        msg = self._new_message(h.channel, rec.json or {}, rec.files, source="followup", interaction=h)
        h.followup_ids.append(msg.id)
        self._notify()
        if rec.query.get("wait") in ("1", "true", "True"):
            return 200, msg.payload()
        return 204, None

    @route("GET", WEBHOOK_MESSAGE, auth=False)
    @route("PATCH", WEBHOOK_MESSAGE, auth=False)
    @route("DELETE", WEBHOOK_MESSAGE, auth=False)
    async def _webhook_message(
        self: FakeDiscord, rec: RecordedRequest, application_id: str, token: str, message_id: str
    ) -> Reply:
        h = self._handle_by_token(application_id, token)
        mid = h.original_id if message_id == "@original" else (int(message_id) if message_id.isdigit() else None)
        if mid is None or (mid != h.original_id and mid not in h.followup_ids) or self.messages[mid].deleted:
            raise unknown("Message", 10008)
        msg = self.messages[mid]
        if rec.method == "GET":
            return 200, msg.payload()
        if rec.method == "DELETE":
            self._delete_message(msg)
            return 204, None
        self._check_upload(rec.files, h.channel)
        self._edit_message(msg, rec.json or {}, rec.files, via="webhook")
        return 200, msg.payload()
