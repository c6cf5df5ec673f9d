"""`animegamer shares`: the operator's say over servers' shares of the GPU (docs/queue.md,
"Quotas and weights"): a server's weight in the fair order and its hourly quotas (`set`, each
change kept with who made it), what is set (`show`), and the usage per server per day (`usage`),
which the metrics leave out (one label per server would not scale)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys

from game.catalogue import load_checked_settings as load_settings
from service import shares


def _quota(value: str) -> int | None:
    """A quota as typed: a number of turns (0: none) or `default` (the settings')."""
    if value == "default":
        return None
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("a number of turns (0: no quota) or 'default'") from None
    if n < 0:
        raise argparse.ArgumentTypeError("a number of turns, 0 or more")
    return n


def _quota_text(v: int | None) -> str:
    return "default" if v is None else ("none" if v == 0 else str(v))


def _run(go) -> int:
    from db.runtime import open_database

    settings = load_settings()

    async def main() -> int:
        async with open_database(settings) as db:
            return await go(db.sessions, settings)

    return asyncio.run(main())


def _set(args) -> int:
    changes: dict = {}
    if args.weight is not None:
        changes["weight"] = args.weight
    for key in ("turns_per_hour", "member_turns_per_hour"):
        if hasattr(args, key):  # (not given: kept as it is)
            changes[key] = getattr(args, key)
    if not changes:
        print("animegamer shares set: nothing to change (--weight, --turns-per-hour, --member-turns-per-hour)", file=sys.stderr)
        return 2

    async def go(sessions, settings) -> int:
        try:
            before, after = await shares.set_share(sessions, args.guild, args.by, **changes)
        except shares.ShareRefused as e:
            print(f"animegamer shares set: {e}", file=sys.stderr)
            return 2
        print(f"server {args.guild}: weight {before.weight:g} -> {after.weight:g}, "
              f"turns per hour {_quota_text(before.turns_per_hour)} -> {_quota_text(after.turns_per_hour)}, "
              f"per member {_quota_text(before.member_turns_per_hour)} -> {_quota_text(after.member_turns_per_hour)}")
        return 0

    return _run(go)


def _show(args) -> int:
    async def go(sessions, settings) -> int:
        print(f"defaults (settings): {_quota_text(settings.server_turns_per_hour or 0)} turns per hour per server, "
              f"{_quota_text(settings.member_turns_per_hour or 0)} per member; weight 1")
        if args.guild is None:
            for guild_id, share in await shares.shared_servers(sessions):
                print(f"server {guild_id}: weight {share.weight:g}, turns per hour {_quota_text(share.turns_per_hour)}, "
                      f"per member {_quota_text(share.member_turns_per_hour)}")
            return 0
        share, changes = await shares.server_changes(sessions, args.guild, args.changes)
        print(f"server {args.guild}: weight {share.weight:g}, turns per hour {_quota_text(share.turns_per_hour)}, "
              f"per member {_quota_text(share.member_turns_per_hour)}")
        for c in changes:
            print(f"  {c.created_at:%Y-%m-%d %H:%M:%S %Z} by {c.actor}: {c.before} -> {c.after}")
        return 0

    return _run(go)


def _usage(args) -> int:
    async def go(sessions, settings) -> int:
        rows = await shares.usage(sessions, args.days, args.guild)
        print(f"{'day (UTC)':<10}  {'server':>20}  {'turns':>7}  {'GPU hours':>9}")
        shown: dict = {}
        for u in rows:
            if shown.setdefault(u.day, 0) >= args.top:
                continue
            shown[u.day] += 1
            print(f"{u.day.isoformat():<10}  {u.guild_id:>20}  {u.turns:>7}  {u.gpu_seconds / 3600:>9.2f}")
        return 0

    return _run(go)


def register(sub) -> None:
    p = sub.add_parser("shares", help="servers' shares of the GPU: weights, hourly quotas, usage per day")
    ssub = p.add_subparsers(dest="shares_command", required=True)
    st = ssub.add_parser("set", help="a server's weight and quotas (each change kept with who made it)")
    st.add_argument("guild", type=int, help="the server's (guild's) id")
    st.add_argument("--weight", type=float, help="its share in the fair order (1: everyone's; 2: twice as many turns when busy)")
    st.add_argument("--turns-per-hour", type=_quota, default=argparse.SUPPRESS, metavar="N|default",
                    help="turns the server may start per rolling hour (0: none; default: the settings')")
    st.add_argument("--member-turns-per-hour", type=_quota, default=argparse.SUPPRESS, metavar="N|default",
                    help="turns one member may start there per rolling hour (0: none; default: the settings')")
    st.add_argument("--by", default=getpass.getuser(), help="who makes the change (kept with it; default: this user)")
    st.set_defaults(func=_set)
    sh = ssub.add_parser("show", help="what is set: every server with its own share, or one with its changes")
    sh.add_argument("guild", type=int, nargs="?")
    sh.add_argument("--changes", type=int, default=10, help="how many of its latest changes to list")
    sh.set_defaults(func=_show)
    us = ssub.add_parser("usage", help="turns and GPU hours per server per UTC day, busiest first")
    us.add_argument("--days", type=int, default=1, help="days back, today included")
    us.add_argument("--guild", type=int, help="one server only")
    us.add_argument("--top", type=int, default=20, help="servers per day")
    us.set_defaults(func=_usage)
