"""Deployment subcommands owned by the bot package: `animegamer invite-url`."""

from __future__ import annotations

import sys


def _invite_url(args) -> int:
    from bot.invite import InviteError, client_id_from_token, invite_url
    from bot.parts.permissions import PERMISSIONS, SCOPE_REASONS

    try:
        if args.client_id:
            client_id = args.client_id
        else:
            from settings import load_settings

            token = load_settings().discord_token
            if token is None or not token.get_secret_value().strip():
                print("animegamer invite-url: give --client-id (Discord developer portal: "
                      "application id) or set ANIMEGAMER_DISCORD_TOKEN", file=sys.stderr)
                return 2
            client_id = client_id_from_token(token.get_secret_value())
        url = invite_url(client_id)
    except InviteError as e:
        print(f"animegamer invite-url: {e}", file=sys.stderr)
        return 2
    print(url)
    if args.explain:
        for p in PERMISSIONS:
            print(f"  {p.label}: {p.why}")
        for scope, why in SCOPE_REASONS.items():
            print(f"  scope {scope}: {why}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("invite-url", help="print the bot's invite URL (exact permissions and scopes)")
    p.add_argument("--client-id", help="application id; default: derived from ANIMEGAMER_DISCORD_TOKEN")
    p.add_argument("--explain", action="store_true", help="also list each permission and why it is needed")
    p.set_defaults(func=_invite_url)
