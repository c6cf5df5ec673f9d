"""Two bot processes on one token, each running one shard of two, against the fake Discord (which
routes each server's events and interactions to the session of its shard), a real Postgres and a
preview worker. Everything a process does on its own (posting finished turns, progress edits,
vote rounds' deadlines, idle pauses, servers that removed the bot) stays with its shard's
servers: every turn is posted exactly once, every vote round is closed once, and while shard 1's
process is down its servers wait for it, untouched by shard 0's, then are served when it returns.
A member's deletion request is the one thing done everywhere by the process that takes it.

The two processes are two AnimeGamerBot instances in this test process (as two processes they
share nothing but Postgres and Discord here too: each has its own gateway session, caches,
notifier, status board and scheduler). Every REST request is attributed to the bot that made it."""

from __future__ import annotations

import json
from dataclasses import dataclass

import discord
import discord.http
import pytest
from sqlalchemy import func, select, text, update

from bot.parts.shards import shard_of
from db.models import GameSession, GuildDeparture, GuildSettings, Turn, VoteRound
from testkit.fake_discord import FakeChannel, FakeGuild, FakeMember, FakeUser
from testkit.queue import wait_until
from tests.bot.conftest import stop_bot
from tests.bot.helpers import answer, is_result, posted_turns, result, turn_messages

POST = ("PATCH", "/channels/{channel_id}/messages/{message_id}")


@dataclass
class Place:
    """A server of the test, its game channel and members."""

    shard: int
    guild: FakeGuild
    games: FakeChannel
    erin: FakeMember  # Manage Server
    alice: FakeMember
    bob: FakeMember
    vote: bool = False  # its game plays by vote


def _place(server, name: str, shard: int, *, vote: bool = False) -> Place:
    g = server.create_guild(name, shard=(shard, 2))
    admins = g.create_role("Discord Admins", permissions=discord.Permissions(manage_guild=True))
    return Place(shard, g, g.create_text_channel("games"), g.create_member("erin", roles=[admins]),
                 g.create_member("alice"), g.create_member("bob"), vote)


async def _say(server, place: Place, member, name: str, options: dict | None = None) -> str:
    h = await server.slash(place.guild, place.games, member, name, options or {})
    text_, _, ephemeral = await answer(h)
    assert ephemeral, name
    return text_


class _World:
    """What helpers.result/turn_messages read: the fake as `server`."""

    def __init__(self, server) -> None:
        self.server = server


@dataclass
class Requests:
    """Every REST request discord.py made, with the HTTP client (the bot) that made it."""

    log: list[tuple[discord.http.HTTPClient, str, str, int | None, int | None]]

    def of(self, bot) -> list[tuple[str, str, int | None, int | None]]:
        return [(m, path, ch, g) for http, m, path, ch, g in self.log if http is bot.http]


@pytest.fixture
def requests(monkeypatch) -> Requests:
    log: list = []
    original = discord.http.HTTPClient.request

    async def request(self, route, **kw):
        channel_id, guild_id = route.channel_id, route.guild_id
        log.append((self, route.method, route.path, channel_id and int(channel_id), guild_id and int(guild_id)))
        return await original(self, route, **kw)

    monkeypatch.setattr(discord.http.HTTPClient, "request", request)
    return Requests(log)


async def test_two_shard_processes_each_serve_only_their_servers(world, start_bot, start_worker, sessions, qsettings, requests):
    # long: one story across two shard processes: both must run at once for the test to mean anything
    server = world.server
    w = _World(server)
    places = [
        _place(server, "Zero A", 0), _place(server, "Zero B", 0), _place(server, "Zero Vote", 0, vote=True),
        _place(server, "One A", 1), _place(server, "One B", 1), _place(server, "One Vote", 1, vote=True),
    ]
    shard_of_channel = {p.games.id: p.shard for p in places}
    shard_of_guild = {p.guild.id: p.shard for p in places}
    assert all(shard_of(p.guild.id, 2) == p.shard for p in places)

    def settings(i: int):
        return qsettings.model_copy(update={"shard_ids": [i], "shard_count": 2})

    async def start(i: int):
        return await start_bot(settings=settings(i), claimant=f"shard-{i}")

    bots = [await start(0), await start(1)]
    assert [str(b.shards_claim) for b in bots] == ["shards 0 of 2", "shards 1 of 2"]
    assert sorted(s.shard for s in server.gateway.sessions.values()) == [[0, 2], [1, 2]]
    for i, b in enumerate(bots):
        assert {p.guild.id for p in places if p.shard == i} <= {g.id for g in b.guilds}
        assert not {p.guild.id for p in places if p.shard != i} & {g.id for g in b.guilds}

    def foreign(bot, i: int) -> list:
        """Requests of shard i's bot that reached another shard's server (its channel or itself)."""
        return [r for r in requests.of(bot) if shard_of_channel.get(r[2], i) != i or shard_of_guild.get(r[3], i) != i]

    # --- games in every server, through the process of its shard
    for p in places:
        assert "Qiqi" in await _say(server, p, p.erin, "admin film", {"film": "qiqi"})
        assert "has started" in await _say(server, p, p.alice, "game start")
        assert "You play Qiqi" in await _say(server, p, p.alice, "game join", {"character": "qiqi"})
        assert "You play Jiji" in await _say(server, p, p.bob, "game join", {"character": "jiji"})
        if p.vote:
            assert "Vote mode is on" in await _say(server, p, p.erin, "vote mode", {"enabled": True, "seconds": 600})

    # --- turns queued in every server, then one preview worker for all: each posted once, by its shard
    plays = [p for p in places if not p.vote]
    for p in plays:
        assert "is queued" in await _say(server, p, p.alice, "act", {"motion": "walk", "background": "town"})
        assert "is queued" in await _say(server, p, p.bob, "act", {"motion": "talk", "background": "bakery", "with": "Qiqi"})
    # A vote round in each vote server, one vote from a member who plays none (so it stays open)...
    voting = [p for p in places if p.vote]
    for p in voting:
        assert "Your proposal is option 1" in await _say(server, p, p.bob, "vote propose", {"motion": "run", "background": "sky"})
    # ...closed by its deadline: by the vote-round job of its shard's process only.
    async with sessions.begin() as s:
        await s.execute(update(VoteRound).values(deadline=func.now() - text("interval '1 second'")))
    # Turns of 1.2 s: a turn's progress is a routine edit, which its post may replace when the turn
    # is over before the channel's edit window lets the progress through (a 0.3 s turn on a busy
    # machine); a turn that runs a while shows its progress.
    worker = await start_worker(films=["qiqi"], backend_options={"delay": 1.2})

    for p in plays:
        for seq in (1, 2):
            await result(w, seq, p.games, timeout=40)
    for p in voting:
        await result(w, 1, p.games, timeout=40)
    turns = await posted_turns(sessions, 2 * len(plays) + len(voting), timeout=10)
    async with sessions() as s:
        session_guild = dict((await s.execute(select(GameSession.id, GameSession.guild_id))).all())
        rounds = (await s.scalars(select(VoteRound).order_by(VoteRound.id))).all()

    def round_messages(p: Place) -> list:
        return [m for m in server.channel_messages(p.games) if m.embeds and m.embeds[0]["title"].startswith("Vote · ")]

    def closing_edits(m) -> list:
        return [e for e in m.edits if "Vote · closed" in json.dumps(e["body"], ensure_ascii=False)]

    def posts_of(message_id: int) -> list:
        return [r for r in server.requests_to(*POST) if r.files and r.params["message_id"] == str(message_id)]

    def check_posted_once(ps: list[Place], seqs_of) -> None:
        for p in ps:
            for seq in seqs_of(p):
                (m,) = turn_messages(w, seq, p.games)  # one message per turn, edited into its post once
                assert is_result(m) and len(posts_of(m.id)) == 1, (p.guild.name, seq)

    check_posted_once(places, lambda p: (1,) if p.vote else (1, 2))
    for t in turns:  # each posted by the process of its server's shard
        assert t.post_claimed_by == f"shard-{shard_of(session_guild[t.session_id], 2)}"
    assert [(r.status, r.turn_id is not None) for r in rounds] == [("closed", True)] * 2
    for p in voting:  # the round's message: shown closed once, by one process
        (m,) = round_messages(p)
        assert m.embeds[0]["title"] == "Vote · closed" and len(closing_edits(m)) == 1, p.guild.name
    progress_seen = [e for p in plays for m in server.channel_messages(p.games) for e in m.edits
                     if "generating" in json.dumps(e["body"], ensure_ascii=False)]
    assert progress_seen, "the worker's progress was shown"
    for i, b in enumerate(bots):
        assert foreign(b, i) == [], f"shard {i}'s process touched another shard's server"

    # --- shard 1's process goes away; turns finish meanwhile in both shards' servers
    worker.stop()
    await worker.task
    zero_a, one_a = plays[0], plays[2]
    for p in (zero_a, one_a):
        assert "is queued" in await _say(server, p, p.alice, "act", {"motion": "sleep", "background": "bedroom"})
    one_vote, zero_vote = voting[1], voting[0]
    for p in voting:
        assert "Your proposal is option 1" in await _say(server, p, p.bob, "vote propose", {"motion": "sit", "background": "town"})
    # (their status and round messages sent before shard 1 goes)
    await server.wait_until(lambda: turn_messages(w, 3, one_a.games), timeout=10, what="One A's turn #3 status message")
    for p in voting:
        await server.wait_until(lambda p=p: len(round_messages(p)) == 2, timeout=10, what=f"{p.guild.name}'s second round")
    await stop_bot(world, bots[1])
    async with sessions.begin() as s:  # both rounds' deadlines pass while shard 1 is down
        await s.execute(update(VoteRound).where(VoteRound.status == "open").values(deadline=func.now() - text("interval '1 second'")))
    await start_worker(films=["qiqi"], backend_options={"delay": 0.3})
    await result(w, 3, zero_a.games, timeout=30)  # shard 0's turn: posted by shard 0
    await result(w, 2, zero_vote.games, timeout=30)  # shard 0's round closed, its turn run and posted

    async def finished():
        async with sessions() as s:
            statuses = (await s.scalars(select(Turn.status).join(GameSession).where(GameSession.guild_id == one_a.guild.id))).all()
        return len(statuses) == 3 and all(st == "done" for st in statuses)

    await wait_until(finished, timeout=30)
    # Shard 0 keeps sweeping (every second) and hears every NOTIFY: shard 1's servers wait.
    for _ in range(3):
        await bots[0].notifier.post_pending()
        await bots[0].get_cog("Vote").tick()
    async with sessions() as s:
        waiting = (await s.scalars(select(Turn).join(GameSession).where(GameSession.guild_id == one_a.guild.id, Turn.seq == 3))).one()
        one_round = (await s.scalars(select(VoteRound).where(VoteRound.guild_id == one_vote.guild.id).order_by(VoteRound.id.desc()))).first()
    assert waiting.status == "done" and waiting.posted_at is None and waiting.post_claimed_by is None
    assert one_round is not None and one_round.status == "open"
    (waiting_message,) = turn_messages(w, 3, one_a.games)
    assert waiting_message.embeds[0]["title"] == "Turn #3 · queued" and not posts_of(waiting_message.id)
    assert [m.embeds[0]["title"] for m in round_messages(one_vote)] == ["Vote · closed", "Vote · open"]
    # Nor does shard 0 take shard 1's servers for servers that removed the bot.
    assert await bots[0].maintenance.departed() == []
    async with sessions() as s:
        assert (await s.scalars(select(GuildDeparture.guild_id))).all() == []
    assert foreign(bots[0], 0) == []

    # Meanwhile the bot is removed from One B (no process of its shard hears it).
    one_b = plays[3]
    server.remove_bot(one_b.guild)

    # --- shard 1 is back: its turn is posted once, its round closed once, One B found gone
    bots[1] = await start(1)
    await result(w, 3, one_a.games, timeout=20)
    await server.wait_until(
        lambda: [m for m in round_messages(one_vote) if m.embeds[0]["title"] == "Vote · closed"][1:],
        timeout=20, what="shard 1's second round closed",
    )
    await result(w, 2, one_vote.games, timeout=30)
    check_posted_once([zero_a, one_a], lambda p: (1, 2, 3))
    check_posted_once(voting, lambda p: (1, 2))
    for p in voting:
        closed = round_messages(p)
        assert [m.embeds[0]["title"] for m in closed] == ["Vote · closed"] * 2
        for m in closed:
            assert len(closing_edits(m)) == 1
    turns = await posted_turns(sessions, 2 * len(plays) + 2 + 2 * len(voting))
    assert all(t.posted_at is not None and t.post_claimed_by == f"shard-{shard_of(session_guild[t.session_id], 2)}" for t in turns)
    assert len(turns) == 2 * len(plays) + 2 + 2 * len(voting)

    # Departures: shard 1 finds One B gone; its deletion is due, and only shard 1 deletes it.
    assert await bots[0].maintenance.departed() == []
    assert await bots[1].maintenance.departed() == []
    async with sessions.begin() as s:
        assert (await s.scalars(select(GuildDeparture.guild_id))).all() == [one_b.guild.id]
        await s.execute(update(GuildDeparture).values(delete_after=func.now() - text("interval '1 second'")))
    assert await bots[0].maintenance.departed() == []
    assert await bots[1].maintenance.departed() == [one_b.guild.id]
    async with sessions() as s:
        left = set((await s.scalars(select(GuildSettings.guild_id))).all())
    assert left == {p.guild.id for p in places} - {one_b.guild.id}

    # --- idle pauses: each process pauses (and tells) its own servers' games only
    async with sessions.begin() as s:
        await s.execute(update(GameSession).values(last_activity_at=func.now() - text("interval '3 days'")))
    live = [p for p in places if p is not one_b]
    paused0 = await bots[0].maintenance.pause_idle()
    async with sessions() as s:
        status = dict((await s.execute(select(GameSession.guild_id, GameSession.status))).all())
    assert {g for g, st in status.items() if st == "paused"} == {p.guild.id for p in live if p.shard == 0}
    assert len(paused0) == 3
    paused1 = await bots[1].maintenance.pause_idle()
    assert len(paused1) == 2
    for p in live:
        notices = [m for m in server.channel_messages(p.games) if "paused (idle)" in (m.content or "")]
        assert len(notices) == 1, p.guild.name
    for i, b in enumerate(bots):
        assert foreign(b, i) == [], f"shard {i}'s process touched another shard's server"
    assert server.unhandled == []


async def test_a_deletion_request_clears_posts_in_every_shards_servers(world, start_bot, start_worker, sessions, qsettings,
                                                                         requests):
    """mia plays in a server of each shard; her /privacy delete, taken by shard 0's process, edits
    her posts in both (through REST: no gateway session of the other shard is needed)."""
    server = world.server
    w = _World(server)
    zero, one = _place(server, "Zero", 0), _place(server, "One", 1)
    mia: FakeUser = server.create_user("mia")
    members = {p.shard: p.guild.add_member(mia) for p in (zero, one)}
    bots = [await start_bot(settings=qsettings.model_copy(update={"shard_ids": [i], "shard_count": 2}), claimant=f"shard-{i}")
            for i in (0, 1)]
    await start_worker(films=["qiqi"])
    for p in (zero, one):
        await _say(server, p, p.erin, "admin film", {"film": "qiqi"})
        await _say(server, p, p.alice, "game start")
        await _say(server, p, members[p.shard], "game join", {"character": "qiqi"})
        assert "is queued" in await _say(server, p, members[p.shard], "act", {"motion": "secretly dance", "background": "bakery"})
    posts = {p.shard: await result(w, 1, p.games, timeout=30) for p in (zero, one)}
    await posted_turns(sessions, 2)

    h = await server.slash(zero.guild, zero.games, members[0], "privacy delete")
    ask = await h.wait_original()
    (custom_id,) = ask.custom_ids
    click = await server.click(ask, members[0], custom_id)
    assert (await click.wait_response()).type == 7
    # bot 0 took the click (the server is on its shard); its deletion job edits both posts.
    for p in (zero, one):
        await server.wait_until(lambda p=p: server.messages[posts[p.shard].id].embeds[0]["title"] == "Turn #1 · removed",
                                timeout=20, what=f"mia's post in {p.guild.name} cleared")
    # The edit in One's channel came from shard 0's process (shard 1's deletion job runs only at
    # its start and then every minute).
    assert [r for r in requests.of(bots[0]) if r[0] == "PATCH" and r[2] == one.games.id]
    for m in posts.values():
        gone = server.messages[m.id]
        assert gone.attachments == [] and gone.components == [] and "secretly" not in str(gone.embeds)
    assert server.unhandled == []
