r"""Fake Discord: run the real discord.py client against a local server in end-to-end tests.

dpytest has no interaction support, so the bot's real ``commands.Bot`` talks to ``FakeDiscord``, an
aiohttp server on 127.0.0.1 (random port) that plays Discord's REST API v10 and JSON gateway.
Nothing in discord.py is mocked: only ``discord.http.Route.BASE`` and
``DiscordWebSocket.DEFAULT_GATEWAY`` point at the fake (``patch_discord``).

Quick start
-----------
::

    from testkit.fake_discord import FakeDiscord, running_client

    async def test_game_start():
        async with FakeDiscord() as server:
            guild = server.create_guild("Test")                 # @everyone, the bot, an owner
            channel = guild.create_text_channel("games")
            mods = guild.create_role("Mods", permissions=discord.Permissions(manage_messages=True))
            alice = guild.create_member("alice", roles=[mods])

            bot = MyBot(intents=..., guild_ready_timeout=0.05)  # 0.05: on_ready without a 2 s wait
            async with running_client(server, bot):             # patch URLs, start, wait for READY
                await bot.tree.sync()                           # slash() needs synced commands
                handle = await server.slash(guild, channel, alice, "game start", {"title": "Sakura"})
                first = await handle.wait_response()            # initial callback: type 4/5/6/7/8/9
                assert first.type == 5                          # deferred
                msg = await server.wait_for_message(channel, lambda m: "Sakura" in m.content, timeout=5)
                assert msg.attachments[0].data.startswith(b"\x00\x00")
            # leaving running_client closes the bot; a new client may connect to the same server

A pytest fixture ``fake_discord`` (fresh started server per test) lives in ``conftest.py``; other
suites can ``from tests.fake_discord.conftest import fake_discord``.

Test-facing API (FakeDiscord)
-----------------------------
World: ``create_guild(name, owner=, upload_limit=, everyone_permissions=, bot_permissions=, shard=)``
(``shard=(shard_id, shard_count)``: an id on that shard),
``create_user(name)``, ``remove_bot(guild)`` (GUILD_DELETE: the bot kicked) and ``add_bot(guild)``
(GUILD_CREATE: added back); on the guild: ``create_text_channel``, ``create_category``,
``create_role(name, permissions=)``, ``create_member(name, roles=)``, ``add_member(user)``,
``remove_member``, ``edit_role(role, permissions=)``, ``owner``, ``me`` (the bot), ``upload_limit``
(mutable, checked per request); channel ``set_overwrite(role_or_member, allow=, deny=)``; member
``add_role`` / ``remove_role``. Changes made while a client is connected reach it as gateway events
(GUILD_CREATE, CHANNEL_*, GUILD_ROLE_*, GUILD_MEMBER_*).
AutoMod (``automod.py``): ``create_automod_rule(guild, name, keywords=, regex=, allow=, enabled=,
exempt_roles=, exempt_channels=)``, ``edit_automod_rule(guild, rule, keywords=, allow=, enabled=)``,
``delete_automod_rule(guild, rule)``: AUTO_MODERATION_RULE_CREATE/UPDATE/DELETE to clients with that
intent; ``GET /guilds/{id}/auto-moderation/rules`` lists them (403 / 50013 without Manage Server).
Permissions follow Discord's algorithm (owner and administrator get everything; overwrites apply).

Drive the bot: ``await slash(guild, channel, member, "group sub", options)``,
``await autocomplete(..., options, focused="name")``, ``await click(message, member, custom_id)``,
``await select(message, member, custom_id, values)``,
``await user_message(channel, member, content)``, ``post_message(channel, components=...)`` (seed a
message, e.g. one posted before a restart), ``make_attachment(filename, data)`` for attachment options.
Option types come from the synced definition; unknown/missing-required options raise before sending.
Interactions carry ``attachment_size_limit`` (discord.py: ``Interaction.filesize_limit``) = the guild's
``upload_limit`` and ``member.permissions`` computed for the channel.

Observe: ``InteractionHandle`` (``wait_response``, ``response``, ``wait_followup``, ``followups``,
``wait_original``, ``original``), ``wait_for_message(channel, predicate, after=, author=)``,
``wait_for_edits(message, n)``, ``wait_for_request(method, route)``, ``wait_until(predicate)``,
``channel_edits(channel, via="channel")`` ((time, message) per edit) and
``max_edits_in_window(channel, 5.0)`` (most edits in any 5 s: Discord's per-channel edit budget),
``channel_messages(channel)``, ``messages`` (id -> FakeMessage with ``content``, ``embeds``,
``components``, ``attachments`` (bytes in ``.data``), ``edit_count``, ``edits``, ``ephemeral``,
``deleted``), ``requests`` (every REST request: method, path, route template, JSON or payload_json,
files, status, response) and ``requests_to(method, route)``, ``commands(guild=None)`` /
``command(name)`` (what tree.sync stored), ``unhandled`` (requests to routes the fake lacks: assert
it is empty). Waits raise ``FakeDiscordTimeout`` (an AssertionError) describing what was there.

Faults and gateway: ``fail_next(method, path_regex | route=template, status=, code=, times=,
retry_after=)`` answers the next ``times`` matching requests with an error and returns the ``Fault``
(``hits``: the requests it answered, ``remaining``); ``status=429`` answers like Discord's rate limit
(``retry_after`` in the body, ``Via`` header), so discord.py sleeps and retries as in production.
``drop_gateway()`` (client RESUMEs; events sent meanwhile are replayed), ``send_reconnect()`` (op 7),
``invalidate_sessions()`` (op 9; discord.py waits 5 s before re-IDENTIFY unless the bot overrides ``before_identify_hook``),
``gateway.log`` (("connect", query), ("identify", sid), ("identify_failed", why), ("resume", sid, seq),
("resumed", sid), ("invalid_session", sid), ("close", code, "client"|"server")), ``gateway.sessions``
(each with its ``shard``, the ``identify`` payload and every dispatched frame, ``s`` numbered 1, 2, 3,
...), ``gateway.guild_sessions(guild_id, connected=)`` (the sessions of the guild's shard) and
``gateway.recommended_shards`` (GET /gateway/bot's ``shards``, default 1).

Discord behaviour emulated
--------------------------
* Errors use Discord's bodies: unknown channel 10003, message 10008, interaction 10062, webhook
  10015, guild 10004; second ack 40060; empty message 50006; oversize
  upload 413 / 40005 (each file against the guild's ``upload_limit``); missing access 50001 and
  missing permissions 50013 (the bot's channel permissions: view, send, attach files, manage messages);
  bad token 401 (``LoginFailure``); invalid command definitions 50035.
* With ``FakeDiscord(interaction_ack_timeout=3.0)`` a first response later than that gets 404 /
  10062 like on Discord; every ``InteractionCallback`` records its ``delay`` either way.
* Deferred responses create a "thinking" message (flag LOADING) that the first @original edit
  replaces; type 6/7 answers make @original the clicked message; ephemeral messages are not in the
  channel and get no gateway events; follow-ups need an acknowledged interaction.
* MESSAGE_CREATE/UPDATE/DELETE follow the intents the client identified with; without
  MESSAGE_CONTENT other users' messages arrive without content unless they mention the bot;
  without GUILD_MEMBERS the GUILD_CREATE member list holds only the bot.
* Sharding: IDENTIFY with ``shard: [shard_id, shard_count]`` gets only the guilds with
  ``(guild_id >> 22) % shard_count == shard_id``: READY's list, GUILD_CREATE, and those guilds'
  events and interactions (events without a guild go to shard 0); without ``shard``, every guild.
  An invalid pair closes with 4010. Every connected session of a guild's shard gets its events and
  interactions, so a shard identified twice (two processes on one token) answers each interaction
  twice, and the later answer fails with 40060, as on Discord. discord.py's AutoShardedClient
  without ``shard_count`` launches ``gateway.recommended_shards`` shards.
* Rate-limit headers are present but never exhausted, so discord.py never sleeps unless a test
  injects a 429 with ``fail_next``.

Scope and limitations
---------------------
The fake serves what the bot calls and the tests need, nothing more: login (``/users/@me``,
``/oauth2/applications/@me``, ``/gateway/bot``), ``tree.sync`` (PUT global and guild commands), a
channel (GET), messages (POST, GET, PATCH, DELETE), interaction callbacks, follow-ups and
``@original``/follow-up messages (GET, PATCH, DELETE). Any other route is answered 404 and recorded
in ``unhandled``: add a handler with ``@route`` in the resource's module when the bot needs one.
Guilds only: no DMs, modals, reactions, typing, member or role REST routes, voice, threads, forum
posts, stickers, polls, emojis, webhooks other than interaction tokens, audit logs or gateway ETF.
One application per server; no "sharding required" (4011) nor identify rate limits per
``max_concurrency``; interaction tokens do not expire; user, role and channel select menus carry no
``resolved`` data; attachment metadata has no image sizes. Interactions go to every connected session
of the guild's shard: two unsharded clients on one server both get (and answer) each one, so run one
bot per shard at a time unless that is what the test is about.

Layout
------
``server.py`` (FakeDiscord: state, lifecycle, waits) is assembled from one mixin per resource:
``guilds.py`` (guilds, members, permissions, world building), ``messages.py`` (channels and
messages), ``attachments.py``, ``application.py`` (login, commands, slash option building),
``interaction_routes.py`` (pushing interactions and their answer routes), ``rest.py`` (routing,
request recording, faults); plus ``gateway.py`` (the websocket), ``interactions.py`` (handles),
``models.py`` (payload objects), ``errors.py`` and ``client.py`` (pointing discord.py at the fake).
A new route is one method in its resource's mixin; it is found by its decorator::

    @route("POST", "/channels/{channel_id}/typing")
    async def _typing(self, rec: RecordedRequest, channel_id: str) -> Reply:
        self._require(self._channel_or_404(channel_id), SEND_MESSAGES)  # Discord's 10003 / 50001 / 50013
        return 204, None
"""

from .client import patch_discord, running_client, start_client, stop_client
from .errors import ApiError, FakeDiscordTimeout
from .guilds import FakeGuild, FakeMember
from .interactions import InteractionCallback, InteractionHandle
from .models import FakeAttachment, FakeChannel, FakeMessage, FakeRole, FakeUser, RecordedRequest
from .rest import Fault
from .server import FakeDiscord

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
    "Fault",
    "InteractionCallback",
    "InteractionHandle",
    "RecordedRequest",
    "patch_discord",
    "running_client",
    "start_client",
    "stop_client",
]
