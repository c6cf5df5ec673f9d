"""The discord.py internals bot/parts/discord_adapter.py relies on are still there.

Each assertion names the installed version, so an upgrade fails here, loudly, rather than in
production: check the adapter against the new release, then update SUPPORTED_VERSION.
"""

from __future__ import annotations

import inspect
import json

import discord
import discord.http
from discord import interactions

from bot.parts import discord_adapter as adapter

VERSION = discord.__version__
WHY = f"discord.py {VERSION} is installed; bot/parts/discord_adapter.py was written for {adapter.SUPPORTED_VERSION}"


def test_installed_version_is_the_supported_one():
    adapter.check_version()  # raises with a message naming both versions
    assert VERSION.startswith(adapter.SUPPORTED_VERSION), WHY


def test_the_interaction_keeps_its_state_and_session():
    assert {"_state", "_session"} <= set(discord.Interaction.__slots__), f"{WHY}: Interaction's slots changed"
    init = inspect.getsource(discord.Interaction.__init__)
    assert "self._state: ConnectionState[ClientT] = state" in init, f"{WHY}: Interaction._state changed"
    assert "self._session: ClientSession = state.http." in init, f"{WHY}: Interaction._session changed"
    http_init = inspect.getsource(discord.http.HTTPClient.__init__)
    for needle in ("self.proxy: Optional[str] = proxy", "self.proxy_auth: Optional[aiohttp.BasicAuth] = proxy_auth",
                   "self.user_agent: str = "):
        assert needle in http_init, f"{WHY}: HTTPClient no longer sets {needle!r}"
    assert discord.http.Route.BASE == "https://discord.com/api/v10", f"{WHY}: Route.BASE is {discord.http.Route.BASE}"


def test_the_response_type_is_what_is_done_reads_and_defer_sets():
    response = interactions.InteractionResponse
    assert "_response_type" in response.__slots__, f"{WHY}: InteractionResponse's slots changed"
    assert "return self._response_type is not None" in inspect.getsource(response.is_done), f"{WHY}: is_done changed"
    defer = inspect.getsource(response.defer)
    assert "self._response_type = InteractionResponseType(defer_type)" in defer, f"{WHY}: defer records its type otherwise"
    # The bare POST's body is what defer(ephemeral=True, thinking=True) sends for every kind of interaction.
    for needle in ("InteractionResponseType.deferred_channel_message.value", "data = {'flags': 64}",
                   "session=parent._session", "proxy=http.proxy", "proxy_auth=http.proxy_auth"):
        assert needle in defer, f"{WHY}: defer no longer has {needle!r}"
    body = json.loads(adapter.THINKING_PRIVATELY)
    assert body == {"type": discord.InteractionResponseType.deferred_channel_message.value, "data": {"flags": 64}}, WHY
