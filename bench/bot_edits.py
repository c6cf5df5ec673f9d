"""The bot's Discord traffic per turn: edits against Discord's budget, queue-position look-ups,
autocomplete queries.

The real bot (discord.py) runs against the fake Discord of the tests, with a real Postgres and an
in-process preview worker. Every turn of every channel is queued first (so status messages show
queue positions), then one worker generates them. Printed per channel: messages per turn, edits,
the most edits in any 5 s window (Discord allows about 5), the smallest gap between two edits;
then queue-position look-ups against progress NOTIFYs, and the queries that autocomplete
keystrokes send once the configuration cache is warm.

Run: PYTHONPATH=. python bench/bot_edits.py [--channels 3] [--turns 5] [--delay 0.4]
Uses a throw-away database on ANIMEGAMER_TEST_PG (default postgresql://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

from _paths import ROOT  # noqa: F401  (first: the project root on sys.path)

import argparse
import asyncio
import itertools
import tempfile
from pathlib import Path

import discord
from sqlalchemy import event, func, select

from bot.client import AnimeGamerBot
from db.engine import make_engine
from db.migrate import upgrade
from db.models import Turn
from db.runtime import open_database
from inference.worker import Worker
from service.runtime import Store
from settings import Settings
from testkit.fake_discord import FakeDiscord, patch_discord, start_client, stop_client
from testkit.pg import fresh_database
from testkit.queue import wait_started


async def slash(server, guild, channel, member, name: str, options: dict | None = None) -> str:
    h = await server.slash(guild, channel, member, name, options or {})
    return (await h.wait_followup(timeout=30)).content


def count_queue_calls(bot) -> dict[str, int]:
    """Wrap the bot's queue-position look-ups and progress updates with counters; the counts."""
    calls = {"position": 0, "refresh": 0, "progress": 0}
    position, positions, progress = bot.queue.position, bot.queue.positions, bot.board.progress

    async def counting_position(s, turn):
        calls["position"] += 1
        return await position(s, turn)

    async def counting_positions(s, turn_ids):
        calls["refresh"] += 1
        return await positions(s, turn_ids)

    def counting_progress(*a):
        calls["progress"] += 1
        progress(*a)

    bot.queue.position, bot.queue.positions, bot.board.progress = counting_position, counting_positions, counting_progress
    return calls


async def queue_turns(server, guild, admin, channels, players, turns: int) -> None:
    """A game per channel, one player each, `turns` /act each (round robin over the channels)."""
    await slash(server, guild, channels[0], admin, "admin film", {"film": "qiqi"})
    for channel, player in zip(channels, players, strict=True):
        await slash(server, guild, channel, player, "game start")
        await slash(server, guild, channel, player, "game join", {"character": "qiqi"})
    for seq in range(turns):
        for channel, player in zip(channels, players, strict=True):
            await slash(server, guild, channel, player, "act", {"motion": "walk", "background": f"town {seq}"})


async def wait_all_posted(db, total: int) -> float:
    """Seconds until `total` turns are posted; SystemExit after 10 minutes."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        async with db.sessions() as s:
            posted = await s.scalar(select(func.count()).select_from(Turn).where(Turn.posted_at.is_not(None)))
        if posted >= total:
            return loop.time() - started
        if loop.time() - started > 600:
            raise SystemExit(f"only {posted} of {total} turns posted after 10 minutes")
        await asyncio.sleep(0.2)


def print_edits(server, channels, turns: int) -> None:
    """Per channel: turn messages per turn, message edits, the most edits in 5 s, the shortest gap."""
    print(f"{'channel':>10} {'messages/turn':>14} {'edits':>6} {'max per 5 s':>12} {'min gap (s)':>12}")
    for channel in channels:
        turn_messages = [m for m in server.channel_messages(channel) if m.embeds]
        times = [at for at, _ in server.channel_edits(channel)]
        gap = min((b - a for a, b in itertools.pairwise(times)), default=float("nan"))
        print(f"{channel.name:>10} {len(turn_messages) / turns:>14.1f} {len(times):>6} "
              f"{server.max_edits_in_window(channel, 5.0):>12} {gap:>12.3f}")


async def measure_autocomplete(server, guild, db, channels, players) -> None:
    """Queries the /act motion autocomplete costs: the first load per channel, then keystrokes."""

    async def keystroke(channel, player, typed: str) -> None:
        h = await server.autocomplete(guild, channel, player, "act", {"motion": typed}, focused="motion")
        await h.wait_response()

    seen: list[str] = []
    event.listen(db.engine.sync_engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    for channel, player in zip(channels, players, strict=True):
        await keystroke(channel, player, "")  # the first keystroke in a channel loads its entry
    loads, seen[:] = len(seen), []
    keystrokes = 0
    for typed in ("f", "fl", "fly", "fly ", "fly o", "fly on"):
        for channel, player in zip(channels, players, strict=True):
            await keystroke(channel, player, typed)
            keystrokes += 1
    sweep = sum("turns" in q for q in seen)  # the notifier's periodic sweep, not autocomplete
    print(f"autocomplete: {loads} queries to load {len(channels)} channels, then {len(seen) - sweep} "
          f"for {keystrokes} keystrokes ({sweep} from the notifier's sweep meanwhile)")


async def run(args) -> None:
    with fresh_database() as url, tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(url)
        await upgrade(engine)
        await engine.dispose()
        settings = Settings(
            database_url=url, data_dir=Path(tmp), cooldown_seconds=0, backlog_cap=100,
            queue_poll_interval=0.2, metrics_port=0, _env_file=None,
        )
        async with FakeDiscord() as server, open_database(settings) as db:
            guild = server.create_guild("bench")
            admin = guild.create_member("admin", roles=[guild.create_role("admins", permissions=discord.Permissions(manage_guild=True))])
            channels = [guild.create_text_channel(f"games-{i}") for i in range(args.channels)]
            players = [guild.create_member(f"player-{i}") for i in range(args.channels)]
            with patch_discord(server):
                bot = AnimeGamerBot(settings, Store(db), guild_ready_timeout=0.05)
                client = await start_client(server, bot)
                await bot.tree.sync()
                calls = count_queue_calls(bot)
                await queue_turns(server, guild, admin, channels, players, args.turns)
                queued = dict(calls)

                worker = Worker(settings, backend="preview", install_signal_handlers=False, migrate=False, progress_interval=0.1,
                                backend_options={"width": 96, "height": 64, "delay": args.delay})
                task = asyncio.create_task(worker.run())
                await wait_started(worker, task)
                total = args.channels * args.turns
                elapsed = await wait_all_posted(db, total)
                await asyncio.sleep(1.0)  # sleep: let the last edits land before counting them

                print(f"{args.channels} channels x {args.turns} turns, preview delay {args.delay} s: all posted in {elapsed:.1f} s")
                print_edits(server, channels, args.turns)
                print(f"queue positions: {queued['position']} single look-ups (one per /act) and {queued['refresh']} "
                      f"refreshes while queuing; {calls['refresh'] - queued['refresh']} refreshes while running, "
                      f"against {calls['progress']} progress NOTIFYs (a refresh is 2 queries; queue changes: {3 * total})")
                await measure_autocomplete(server, guild, db, channels, players)

                worker.stop()
                await asyncio.wait_for(task, 30)
                await stop_client(bot, client)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--turns", type=int, default=5)
    p.add_argument("--delay", type=float, default=0.4, help="seconds the preview backend takes per turn")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
