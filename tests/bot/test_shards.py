"""Gateway shards across bot processes (bot/parts/shards.py): the shard formula as discord.py computes
it, the claim's SQL filter in a real Postgres query, the shard settings and `animegamer bot
--shards/--shard-count`, and the bot started on one shard of two against the fake Discord, which
then gets only that shard's servers."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime

import discord
import pytest
from sqlalchemy import insert, select

import bot.commands as bot_commands
from animegamer.cli import main
from bot.parts.health import gateway_state
from bot.parts.shards import ShardClaim, format_shard_ids, parse_shard_ids, shard_of
from db.claims import claimed, shard_expr
from db.models import GuildSettings
from settings import Settings, SettingsError, load_settings
from testkit.fake_discord.gateway import shard_of as fake_shard_of

# Guild ids spread over shards: snowflakes of many moments, the extremes, and random 63-bit ids.
IDS = [discord.utils.time_snowflake(datetime(2015 + y, 1 + y % 12, 1 + y, y, y, tzinfo=UTC)) for y in range(11)]
IDS += [0, 1, (1 << 22) - 1, 1 << 22, 175928847299117063, 2**63 - 1]
IDS += [random.Random(25).randrange(1 << 22, 2**63) for _ in range(200)]


# --- the formula and the claim -------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 8, 16, 1000])
def test_shard_of_is_discords_formula(count):
    """discord.py's Guild.shard_id and AutoShardedClient route by (id >> 22) % count; so do the fake and shard_of."""
    state = type("State", (), {"shard_count": count})()
    for gid in IDS:
        guild = discord.Guild.__new__(discord.Guild)
        guild.id, guild._state = gid, state  # only what Guild.shard_id reads
        assert shard_of(gid, count) == guild.shard_id == fake_shard_of(gid, count) == (gid >> 22) % count


def test_a_claim_owns_its_shards_guilds():
    claim = ShardClaim.of([0, 2], 4)
    assert [claim.owns(g) for g in IDS] == [shard_of(g, 4) in (0, 2) for g in IDS]
    assert claim.owns(None) and not ShardClaim.of([1], 2).owns(None)  # no guild (a DM): shard 0
    assert not claim.everything and str(claim) == "shards 0,2 of 4"
    assert str(ShardClaim.of([5, 0, 1, 2, 3, 5], 8)) == "shards 0-3,5 of 8"
    for everything in (ShardClaim(), ShardClaim.of(None, 4), ShardClaim.of([1, 0], 2)):
        assert everything.everything and all(everything.owns(g) for g in [*IDS, None])
    assert str(ShardClaim()) == "every shard" and str(ShardClaim.of([0, 1], 2)) == "every shard of 2"
    for ids, count in (([2], 2), ([0], None), ([], 2), ([0], 0), ([-1], 2)):
        with pytest.raises(ValueError):
            ShardClaim.of(ids, count)


def test_shard_id_text():
    assert parse_shard_ids("0-3") == [0, 1, 2, 3]
    assert parse_shard_ids("0,2,5") == [0, 2, 5]
    assert parse_shard_ids(" 5, 0-2 ,1 - 3,7") == [0, 1, 2, 3, 5, 7]
    assert format_shard_ids([0, 1, 2, 3, 5, 7, 8]) == "0-3,5,7-8" and format_shard_ids([4]) == "4"
    for bad, says in (("", "no shard ids"), ("3-1", "goes down"), ("a", "not a shard id"), ("-1", "not a shard id"),
                      ("0,,1", "not a shard id"), ("1-", "not a shard id"), ("²", "not a shard id"),
                      ("0-99999999", "beyond any shard count")):
        with pytest.raises(ValueError, match=says):
            parse_shard_ids(bad)


async def test_the_sql_filter_keeps_exactly_the_claimed_guilds_rows(sessions):
    """Postgres computes (guild_id >> 22) % count on the bigint itself: ids near 2**63 included."""
    rows = sorted(set(IDS))
    async with sessions() as s:  # one transaction, rolled back
        await s.execute(insert(GuildSettings), [{"guild_id": g} for g in rows])
        for claim in (ShardClaim.of([0], 2), ShardClaim.of([1], 2), ShardClaim.of([0, 2, 5], 8), ShardClaim.of([7], 8),
                      ShardClaim.of(range(999), 1000), ShardClaim.of(None, 8), ShardClaim()):
            got = (await s.scalars(select(GuildSettings.guild_id).where(claimed(GuildSettings.guild_id, claim)))).all()
            assert sorted(got) == [g for g in rows if claim.owns(g)], claim
        # Also as Postgres' own shard for each row, beside Python's.
        shard = shard_expr(GuildSettings.guild_id, 8)  # (guild_id >> 22) % 8
        pairs = (await s.execute(select(GuildSettings.guild_id, shard))).all()
        assert all(pg == shard_of(g, 8) for g, pg in pairs) and len(pairs) == len(rows)
        await s.rollback()


# --- settings and the command line -----------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for k in list(os.environ):
        if k.startswith("ANIMEGAMER_SHARD"):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)  # no .env or animegamer.toml here


def test_shard_settings(clean_env, monkeypatch):
    assert (load_settings().shard_ids, load_settings().shard_count) == (None, None)
    monkeypatch.setenv("ANIMEGAMER_SHARD_COUNT", "8")
    monkeypatch.setenv("ANIMEGAMER_SHARD_IDS", "0-3")
    assert (load_settings().shard_ids, load_settings().shard_count) == ([0, 1, 2, 3], 8)
    monkeypatch.setenv("ANIMEGAMER_SHARD_IDS", "0,2,5")
    assert load_settings().shard_ids == [0, 2, 5]
    monkeypatch.setenv("ANIMEGAMER_SHARD_IDS", "[1, 3]")  # a JSON list, like other list settings
    assert load_settings().shard_ids == [1, 3]
    monkeypatch.setenv("ANIMEGAMER_SHARD_IDS", "")  # compose's unset ${VAR:-}
    assert load_settings().shard_ids is None
    assert Settings(shard_ids=[3, 1, 3], shard_count=4, _env_file=None).shard_ids == [1, 3]  # TOML or code: a list
    for ids, count, says in (("0-8", "8", "ANIMEGAMER_SHARD_IDS: .*shard 8 is not below the shard count 8"),
                             ("0-3", "", "ANIMEGAMER_SHARD_IDS: .*need the total shard count"),
                             ("3-1", "8", "ANIMEGAMER_SHARD_IDS: .*goes down"),
                             ("0", "0", "ANIMEGAMER_SHARD_COUNT: .*greater than or equal to 1")):
        monkeypatch.setenv("ANIMEGAMER_SHARD_IDS", ids)
        monkeypatch.setenv("ANIMEGAMER_SHARD_COUNT", count)
        with pytest.raises(SettingsError, match=says):
            load_settings()


@pytest.fixture
def started(clean_env, monkeypatch):
    """`animegamer bot` up to the bot's start: the settings it would run with, instead of running."""
    ran: list[Settings] = []

    async def run(settings, *, sync, migrate):
        ran.append(settings)
        return 0

    monkeypatch.setenv("ANIMEGAMER_DISCORD_TOKEN", "token")
    monkeypatch.setattr(bot_commands, "_run", run)
    return ran


def test_bot_shards_on_the_command_line(started, monkeypatch, capsys):
    assert main(["bot", "--shards", "0-3", "--shard-count", "8"]) == 0
    assert main(["bot", "--shards", "1,3", "--shard-count", "4"]) == 0
    assert main(["bot", "--shard-count", "2"]) == 0  # every shard of 2 in this process
    assert main(["bot"]) == 0  # Discord's recommended count, every shard here
    monkeypatch.setenv("ANIMEGAMER_SHARD_IDS", "0-1")
    monkeypatch.setenv("ANIMEGAMER_SHARD_COUNT", "2")
    assert main(["bot"]) == 0  # from the settings
    assert main(["bot", "--shards", "2-3", "--shard-count", "4"]) == 0  # the flags win
    assert main(["bot", "--shard-count", "6"]) == 0  # the settings' ids, the flag's count
    assert [(s.shard_ids, s.shard_count) for s in started] == [
        ([0, 1, 2, 3], 8), ([1, 3], 4), (None, 2), (None, None), ([0, 1], 2), ([2, 3], 4), ([0, 1], 6),
    ]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("argv", "says"), [
    (["--shards", "3-1", "--shard-count", "8"], "argument --shards: the range '3-1' goes down: write it 1-3"),
    (["--shards", "x", "--shard-count", "8"], "argument --shards: 'x' is not a shard id or a range such as 0-3"),
    (["--shards", "0-3", "--shard-count", "0"], "argument --shard-count: '0' is not a shard count"),
    (["--shards", "0-3", "--shard-count", "two"], "argument --shard-count: 'two' is not a shard count"),
])
def test_bot_shard_flags_that_do_not_parse(started, capsys, argv, says):
    with pytest.raises(SystemExit) as exit_:
        main(["bot", *argv])
    assert exit_.value.code == 2 and says in capsys.readouterr().err and not started


@pytest.mark.parametrize(("argv", "env", "says"), [
    (["--shards", "0-8", "--shard-count", "8"], {},
     "--shards/--shard-count: shard 8 is not below the shard count 8: the shards are numbered 0 to 7"),
    (["--shards", "0-3"], {}, "shard ids need the total shard count too"),
    (["--shard-count", "2"], {"ANIMEGAMER_SHARD_IDS": "0-3"}, "shard 2 is not below the shard count 2"),
])
def test_bot_shard_flags_that_do_not_fit(started, monkeypatch, capsys, argv, env, says):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["bot", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and not started
    if "--shards/" not in says:
        assert "--shards sets ANIMEGAMER_SHARD_IDS" in err  # which flag is which setting


# --- the bot against the fake Discord --------------------------------------------------------------


def _guild_on(server, name: str, shard: tuple[int, int]):
    guild = server.create_guild(name, shard=shard)
    guild.create_text_channel("games")
    guild.create_member("alice")
    return guild


async def test_the_bot_on_shard_0_of_2_gets_only_its_servers(world, start_bot, qsettings):
    server = world.server
    mine = [_guild_on(server, "Zero A", (0, 2)), _guild_on(server, "Zero B", (0, 2))]
    theirs = _guild_on(server, "One", (1, 2))
    bot = await start_bot(settings=qsettings.model_copy(update={"shard_ids": [0], "shard_count": 2}))

    expected = {g.id for g in server.guilds.values() if shard_of(g.id, 2) == 0}  # the world's guild may be either
    assert {g.id for g in mine} <= expected and theirs.id not in expected
    assert {g.id for g in bot.guilds} == expected
    assert list(bot.shards) == [0] and bot.shard_count == 2 and bot.shard_ids == [0]
    assert all(g.shard_id == 0 for g in bot.guilds)
    assert str(bot.shards_claim) == "shards 0 of 2" and not bot.shards_claim.owns(theirs.id)
    assert all(bot.shards_claim.owns(g) for g in expected)
    (session,) = server.gateway.sessions.values()  # one process, one shard: one gateway session
    assert session.shard == [0, 2]
    assert not server.requests_to("GET", "/gateway/bot")  # the count was given
    assert gateway_state(bot) == "connected"

    # Its servers' commands reach it; the other shard's are for a process not running here.
    for guild in mine:
        h = await server.slash(guild, guild.channel("games"), guild.member("alice"), "help")
        assert (await h.wait_response(timeout=5)).type == 5  # deferred: the bot took it
    server.session_wait = 0.2
    with pytest.raises(RuntimeError, match="no gateway session for guild 'One'"):
        await server.slash(theirs, theirs.channel("games"), theirs.member("alice"), "help")
    _guild_on(server, "One More", (1, 2))  # the bot joins two servers: only shard 0's reaches it
    late = _guild_on(server, "Zero C", (0, 2))
    await server.wait_until(lambda: bot.get_guild(late.id), 5, "the new server on shard 0")
    assert {g.id for g in bot.guilds} == expected | {late.id}
    assert {shard_of(int(f["d"].get("guild_id") or f["d"]["id"]), 2) for f in session.buffer[1:]} == {0}


async def test_the_bot_unsharded_runs_every_recommended_shard(world, start_bot):
    """No shard settings: discord.py asks GET /gateway/bot (1 shard for a small bot) and runs it all."""
    server = world.server
    other = _guild_on(server, "Elsewhere", (1, 2))
    bot = await start_bot()
    assert server.requests_to("GET", "/gateway/bot") and bot.shard_count == 1 and list(bot.shards) == [0]
    assert [s.shard for s in server.gateway.sessions.values()] == [[0, 1]]
    assert {g.id for g in bot.guilds} == {world.guild.id, other.id}
    assert bot.shards_claim.everything and bot.shards_claim.owns(other.id)
    assert gateway_state(bot) == "connected"
    # /healthz's gateway state follows the shard's socket.
    server.gateway.refusing = True
    await server.drop_gateway()
    await server.wait_until(lambda: gateway_state(bot) == "disconnected", 10, "the shard seen down")
    server.gateway.refusing = False
    await server.wait_until(lambda: gateway_state(bot) == "connected", 30, "the shard seen up again")
