"""Every use of discord.py beyond its public API, in one module.

discord.py (2.7) carries the bot. What its public API does not offer is used here only, so an
upgrade has one file to check (tests/bot/test_discord_adapter.py fails, naming the installed
version, when any of it changes):

- `Interaction._state.http` (the client's HTTPClient: its user agent and proxy) and
  `Interaction._session` (its aiohttp session), to send a deferral as one bare POST;
- `InteractionResponse._response_type`, set as discord.py's own `defer` sets it, so that
  `is_done()` and the follow-ups know the interaction was acknowledged.
"""

from __future__ import annotations

import aiohttp
import discord
import discord.http

SUPPORTED_VERSION = "2.7"  # the release whose internals this module uses
# The body discord.py's defer(ephemeral=True, thinking=True) sends, for commands, buttons and modals alike.
THINKING_PRIVATELY = b'{"type":5,"data":{"flags":64}}'


def installed_version() -> str:
    return discord.__version__


def check_version() -> None:
    """Raise if the installed discord.py is not the release this module was written against."""
    v = installed_version()
    if not (v == SUPPORTED_VERSION or v.startswith(SUPPORTED_VERSION + ".")):
        raise RuntimeError(
            f"discord.py {v} is installed; bot/parts/discord_adapter.py uses the internals of {SUPPORTED_VERSION} "
            "(Interaction._state, Interaction._session, InteractionResponse._response_type): re-check them"
        )


async def defer_thinking_privately(interaction: discord.Interaction) -> bool:
    """A private "thinking" deferral as one POST on discord.py's own session (its connections, its
    proxy, the HTTP trace the client was made with). Without `with_response` Discord answers 204
    and no body: nothing to parse into the callback response and message objects that discord.py's
    defer asks for and a deferral never reads (the larger part of that defer's CPU under a burst,
    bench/channels.py). False on any failure: the caller then sends discord.py's defer, with its
    retries and its errors (an expired interaction's NotFound)."""
    http = interaction._state.http
    url = f"{discord.http.Route.BASE}/interactions/{interaction.id}/{interaction.token}/callback"
    headers = {"Content-Type": "application/json", "User-Agent": http.user_agent}
    try:
        async with interaction._session.post(url, data=THINKING_PRIVATELY, headers=headers,
                                             proxy=http.proxy, proxy_auth=http.proxy_auth) as r:
            if not 200 <= r.status < 300:
                return False
    except (TimeoutError, aiohttp.ClientError):
        return False
    # What discord.py's defer records: the response is done, follow-ups edit the "thinking" message.
    interaction.response._response_type = discord.InteractionResponseType.deferred_channel_message
    return True
