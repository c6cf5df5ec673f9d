"""The bot's invite URL, with exactly the permissions and scopes of bot.parts.permissions."""

from __future__ import annotations

import base64
import binascii

import discord

from bot.parts.permissions import SCOPES, bot_permissions


class InviteError(ValueError):
    pass


def client_id_from_token(token: str) -> str:
    """A bot token's first segment is the bot user's id in base64; for bot applications that id
    is also the application (client) id."""
    first = token.strip().split(".", 1)[0]
    try:
        raw = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    if not raw.isdigit():
        raise InviteError("the Discord token does not look like a bot token (its first part is not a base64 id)")
    return raw


def invite_url(client_id: int | str) -> str:
    cid = str(client_id).strip()
    if not cid.isdigit():
        raise InviteError(f"client id must be a number, got {client_id!r}")
    return discord.utils.oauth_url(cid, permissions=bot_permissions(), scopes=SCOPES)
