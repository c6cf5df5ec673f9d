"""The check's bot talks to the fake Discord (testkit/fake_discord) running on the host: Python runs
this at start (it is on PYTHONPATH in docker/check/compose.override.yaml only) and points
discord.py's two URL hooks there, as the tests' patch_discord does. Nothing else is changed."""

import os

_API = os.environ.get("CHECK_DISCORD_API")
if _API:
    import discord.gateway
    import discord.http
    import yarl

    discord.http.Route.BASE = _API
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(os.environ["CHECK_DISCORD_GATEWAY"])
