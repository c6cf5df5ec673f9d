"""The compose stack through a whole turn (run by scripts/compose-check.sh once the images exist).

    python -m tests.deploy.compose_check --project P --tag T --postgres-image I --env-file F

The fake Discord (testkit/fake_discord) runs here, in this process; the stack is docker/compose.yaml
with docker/check/compose.override.yaml. It checks: migrate runs once and exits 0; every
healthcheck turns healthy; every process in the containers runs as a non-root user; the bot
connects, a game starts, a turn is played by the preview worker and its MP4 is posted exactly once;
after `down` and `up` the game, its turns and their clips are still there (the named volumes) and
the game goes on (a second turn). Each step prints its time. Exit status 0: passed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import socket
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import discord
import yaml

from testkit.fake_discord import FakeDiscord
from testkit.waits import wait_for
from tests.bot.helpers import answer, is_result

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
OVERRIDE = ROOT / "docker" / "check" / "compose.override.yaml"
SERVICES = ("postgres", "migrate", "bot", "worker-gpu0")
LONG_RUNNING = ("postgres", "bot", "worker-gpu0")
USERS = {"postgres": None, "bot": "10001", "worker-gpu0": "10001"}  # None: any uid but 0


class CheckFailed(Exception):
    pass


def log(text: str) -> None:
    print(f"compose-check: {text}", file=sys.stderr, flush=True)


def free_postgres_address() -> str:
    """A loopback address whose port 5432 is free for the published Postgres (the host may run its own)."""
    for last in range(1, 10):
        address = f"127.0.0.{last}"
        with socket.socket() as s:
            try:
                s.bind((address, 5432))
            except OSError:
                continue
            return address
    raise CheckFailed("port 5432 is taken on 127.0.0.1-9")


class Stack:
    """docker-compose (Debian's 1.29, compose v1) on docker/compose.yaml and the check's override.

    Compose v1 lacks two things the file uses (docs/deployment-check.md): the top-level `name:`
    (it refuses the file; the project name is given with -p instead) and `!reset` (so the workers'
    GPU reservation is dropped from the merged file rather than in the override)."""

    def __init__(self, project: str, env_file: Path) -> None:
        self.project = project
        self.env_file = env_file
        self.merged = env_file.with_name("compose.check.yaml")

    async def run(self, *args: str, check: bool = True, files: tuple[Path, ...] | None = None) -> str:
        cmd = ["docker-compose", "-p", self.project, "--project-directory", str(COMPOSE.parent),
               "--env-file", str(self.env_file)]
        for f in files or (self.merged,):
            cmd += ["-f", str(f)]
        return await sh(*cmd, *args, check=check, cwd=COMPOSE.parent)

    async def merge(self) -> None:
        """compose.yaml (less `name:`) + the override, merged (and the values filled in) by compose
        itself, less the monitoring profile and the workers' GPU reservation."""
        base = yaml.safe_load(COMPOSE.read_text())
        log(f"compose v1: top-level name {base.pop('name')!r} left out (v1 refuses it); the project is -p {self.project}")
        v1 = self.env_file.with_name("compose.v1.yaml")
        v1.write_text(yaml.safe_dump(base, sort_keys=False))
        config = yaml.safe_load(await self.run("config", files=(v1, OVERRIDE)))
        for name, service in list(config["services"].items()):
            if "profiles" in service:
                del config["services"][name]
                log(f"{name} (profile {', '.join(service['profiles'])}) left out: its image comes only from Docker Hub")
            elif name.startswith("worker-") and service.pop("deploy", None) is not None:
                log(f"{name}: GPU reservation dropped (no GPU here; the preview backend runs on the CPU)")
        self.merged.write_text(yaml.safe_dump(config, sort_keys=False))

    async def container(self, service: str) -> str:
        ids = (await self.run("ps", "-a", "-q", service)).split()
        if len(ids) != 1:
            raise CheckFailed(f"{service}: {len(ids)} containers")
        return ids[0]

    async def inspect(self, service: str) -> dict:
        return json.loads(await sh("docker", "inspect", await self.container(service)))[0]


async def sh(*cmd: str, check: bool = True, cwd: Path | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if check and proc.returncode != 0:
        raise CheckFailed(f"{' '.join(cmd)}: exit {proc.returncode}\n{err.decode()[-3000:]}")
    return out.decode()


async def timed(name: str, coro):
    t0 = time.monotonic()
    log(f"-- {name}")
    result = await coro
    log(f"   {name}: {time.monotonic() - t0:.0f} s")
    return result


async def wait_healthy(stack: Stack, timeout: float = 240) -> None:
    states: dict[str, str] = {}

    async def healthy() -> bool:
        for service in LONG_RUNNING:
            state = (await stack.inspect(service))["State"]
            states[service] = state.get("Health", {}).get("Status", "no healthcheck")
            if state["Status"] != "running":
                logs = await stack.run("logs", "--tail", "40", service, check=False)
                raise CheckFailed(f"{service} is {state['Status']} (exit {state['ExitCode']}):\n{logs}")
        return all(s == "healthy" for s in states.values())

    try:  # polled every 2 s: each poll is a `docker inspect` per service
        await wait_for(healthy, timeout, interval=2, what="every healthcheck healthy")
    except AssertionError:
        raise CheckFailed(f"not healthy after {timeout:.0f} s: {states}") from None
    log(f"   healthy: {', '.join(states)}")


async def check_migrate(stack: Stack) -> None:
    state = (await stack.inspect("migrate"))
    if state["State"]["Status"] != "exited" or state["State"]["ExitCode"] != 0 or state["RestartCount"] != 0:
        raise CheckFailed(f"migrate: {state['State']['Status']}, exit {state['State']['ExitCode']}, "
                          f"restarted {state['RestartCount']} times")
    log("   migrate ran once and exited 0")


async def check_users(stack: Stack) -> None:
    for service, expected in USERS.items():
        top = await sh("docker", "top", await stack.container(service), "-eo", "pid,uid,args")
        rows = [line.split(None, 2) for line in top.strip().splitlines()[1:]]
        uids = {row[1] for row in rows}
        if "0" in uids or (expected and uids != {expected}):
            raise CheckFailed(f"{service} runs processes as uid {sorted(uids)}:\n{top}")
        log(f"   {service}: {len(rows)} processes, all uid {'/'.join(sorted(uids))}")


async def say(w, member, name: str, options: dict | None = None) -> str:
    h = await w.server.slash(w.guild, w.games, member, name, options or {})
    text, _, _ = await answer(h, timeout=30)
    return text


def mp4_posts(server: FakeDiscord, filename: str) -> int:
    """Messages created or edited with the clip as a new file (Discord's multipart uploads)."""
    return sum(1 for r in server.requests for f in (r.files or []) if getattr(f, "filename", None) == filename)


async def play_turn(w, seq: int, motion: str) -> None:
    text = await say(w, w.alice, "act", {"motion": motion, "background": "town"})
    if "is queued" not in text:
        raise CheckFailed(f"/act answered {text!r}")
    message = await w.server.wait_for_message(w.games, lambda m: is_result(m, seq), timeout=120)
    clip = message.attachments[0] if message.attachments else None
    if clip is None or clip.filename != f"turn-{seq}.mp4" or not clip.data:
        raise CheckFailed(f"turn #{seq} was posted without its clip: {message.attachments}")
    log(f"   turn #{seq}: {clip.filename} posted ({len(clip.data)} bytes)")


async def posted_mark(stack: Stack, seq: int, timeout: float = 60) -> None:
    """Wait until the bot has recorded turn #`seq` as posted: the end of its posting. Once the
    mark is there no poster claims the turn again, so a second upload would have come before it."""

    async def marked() -> bool:
        out = await stack.run("exec", "-T", "postgres", "psql", "-U", "animegamer", "-d", "animegamer", "-At", "-c",
                              f"SELECT count(*) FROM turns WHERE seq = {int(seq)} AND posted_at IS NOT NULL")
        return int(out.strip() or 0) > 0

    try:
        await wait_for(marked, timeout, interval=0.5, what=f"turn #{seq} marked posted")
    except AssertionError:
        raise CheckFailed(f"turn #{seq} was not marked posted within {timeout:.0f} s") from None


async def stored(stack: Stack) -> tuple[int, int, int]:
    out = await stack.run("exec", "-T", "postgres", "psql", "-U", "animegamer", "-d", "animegamer", "-At", "-c",
                          "SELECT (SELECT count(*) FROM game_sessions), (SELECT count(*) FROM turns), "
                          "(SELECT count(*) FROM turns WHERE mp4 IS NOT NULL)")
    games, turns, clips = (int(x) for x in out.strip().split("|"))
    return games, turns, clips


async def up(stack: Stack) -> None:
    await stack.run("up", "-d", "--no-build")
    await check_migrate(stack)
    await wait_healthy(stack)
    await check_users(stack)


async def main(args) -> None:
    env_file = Path(args.env_file)
    async with FakeDiscord() as server:
        guild = server.create_guild("AnimeGamer Compose Check")
        erin = guild.create_member("erin", roles=[guild.create_role("Admins", permissions=discord.Permissions(manage_guild=True))])
        w = SimpleNamespace(server=server, guild=guild, games=guild.create_text_channel("games"),
                            alice=guild.create_member("alice"), erin=erin)
        pg = free_postgres_address()
        env_file.write_text("\n".join([
            f"TAG={args.tag}", "BACKEND=preview", "FILM=qiqi", "FILMS=qiqi",
            f"POSTGRES_PASSWORD={secrets.token_hex(16)}", f"POSTGRES_BIND={pg}",
            f"ANIMEGAMER_DISCORD_TOKEN={server.token}",
            f"CHECK_POSTGRES_IMAGE={args.postgres_image}",
            f"CHECK_DISCORD_API={server.api_base}", f"CHECK_DISCORD_GATEWAY={server.gateway_url}",
        ]) + "\n")
        stack = Stack(args.project, env_file)
        await stack.merge()
        try:
            await whole_turn(stack, w)
        finally:
            await timed("down --volumes", stack.run("down", "--volumes", check=False))


async def whole_turn(stack: Stack, w) -> None:
    server = w.server
    await timed("up (migrate, healthchecks, users)", up(stack))
    await timed("bot connected and commands synced", server.wait_until(lambda: bool(server.commands()), timeout=60))

    async def first_game():
        assert "Qiqi" in await say(w, w.erin, "admin film", {"film": "qiqi"})
        assert "has started" in await say(w, w.alice, "game start")
        assert "You play Qiqi" in await say(w, w.alice, "game join", {"character": "qiqi"})
        await play_turn(w, 1, "run")

    await timed("a game and a turn (preview worker)", first_game())
    await posted_mark(stack, 1)  # a second post would have come before the mark
    if (n := mp4_posts(server, "turn-1.mp4")) != 1:
        raise CheckFailed(f"turn-1.mp4 was uploaded {n} times")
    log("   turn-1.mp4 uploaded exactly once")
    before = await stored(stack)
    log(f"   stored: {before[0]} game(s), {before[1]} turn(s), {before[2]} clip(s)")

    await timed("down", stack.run("down"))
    await timed("up again", up(stack))
    after = await stored(stack)
    if after != before:
        raise CheckFailed(f"after down/up: {after} (games, turns, clips), before: {before}")
    log(f"   still stored after down/up: {after[0]} game(s), {after[1]} turn(s), {after[2]} clip(s)")
    await timed("the game goes on: a second turn", play_turn(w, 2, "jump"))
    await posted_mark(stack, 2)
    counts = (mp4_posts(server, "turn-1.mp4"), mp4_posts(server, "turn-2.mp4"))
    if counts != (1, 1):
        raise CheckFailed(f"uploads of turn-1.mp4, turn-2.mp4: {counts}")
    log("   each clip uploaded exactly once")
    if server.unhandled:
        raise CheckFailed(f"the bot called routes the fake Discord lacks: {server.unhandled}")


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compose_check")
    p.add_argument("--project", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--postgres-image", required=True)
    p.add_argument("--env-file", required=True)
    args = p.parse_args(argv)
    try:
        asyncio.run(main(args))
    except (CheckFailed, AssertionError, TimeoutError) as e:
        log(f"FAILED: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli())
