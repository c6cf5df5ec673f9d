"""Quotas and weights (service.shares) on the real Postgres: a server's and a member's turns per
hour refused with the wait until the next one, which comes when the window says; the operator's
changes kept with who made them; what /admin show reads."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from animegamer.cli import main
from db.models import VoteRound
from game.turn_errors import MemberQuota, ServerQuota
from service import admin, moderation, players, shares, voting
from service.deps import Deps, Member, Place
from service.players import ActFields
from service.shares import ShareRefused

HERE, THERE = Place(100, 200), Place(100, 201)
ALICE, BOB, MOD = Member(1, "alice"), Member(2, "bob"), Member(9, "mod")
WALK = ActFields("walk", "town")


async def _playing(deps: Deps, place: Place = HERE) -> None:
    await admin.set_film(deps, place, MOD, "qiqi")
    await players.start(deps, place, ALICE)
    await players.join(deps, place, ALICE, "qiqi")
    await players.join(deps, place, BOB, "jiji")


async def _age_oldest(sessions, minutes: float) -> None:
    """Move the oldest turn's submission `minutes` into the past, as time passing would."""
    async with sessions.begin() as s:
        await s.execute(text("UPDATE turns SET created_at = created_at - make_interval(mins => :m)"
                             " WHERE id = (SELECT min(id) FROM turns)"), {"m": minutes})


async def test_a_servers_quota_refuses_with_the_wait_and_lets_the_next_turn_in_when_the_hour_has_passed(deps, sessions):
    await shares.set_share(sessions, HERE.guild_id, "operator", turns_per_hour=3)
    await _playing(deps, HERE)
    await _playing(deps, THERE)  # the same server's other channel shares its quota
    await players.act(deps, HERE, ALICE, WALK)
    await players.act(deps, THERE, BOB, WALK)
    await players.act(deps, HERE, BOB, WALK)
    with pytest.raises(ServerQuota) as refused:
        await players.act(deps, THERE, ALICE, WALK)
    assert refused.value.params["n"] == 3 and 3500 < refused.value.seconds_left <= 3600
    assert refused.value.message == "This server has played its 3 turns of the past hour; its next turn is possible in 60 minutes."

    await _age_oldest(sessions, 59)  # a minute before the oldest turn leaves the window: still full
    with pytest.raises(ServerQuota) as refused:
        await players.act(deps, THERE, ALICE, WALK)
    assert 0 < refused.value.seconds_left <= 60
    await _age_oldest(sessions, 2)  # now it has left: one turn fits again, and only one
    await players.act(deps, THERE, ALICE, WALK)
    with pytest.raises(ServerQuota):
        await players.act(deps, HERE, ALICE, WALK)


async def test_a_members_quota_counts_their_turns_only_and_cancelled_turns_do_not_count(deps, sessions, settings):
    deps = Deps(settings.model_copy(update={"member_turns_per_hour": 2}), sessions, deps.jobs)
    await _playing(deps)
    first = await players.act(deps, HERE, ALICE, WALK)
    await players.act(deps, HERE, ALICE, WALK)
    with pytest.raises(MemberQuota) as refused:
        await players.act(deps, HERE, ALICE, WALK)
    assert refused.value.code == "member_quota" and "you can act again in" in refused.value.message
    await players.act(deps, HERE, BOB, WALK)  # another member's own quota
    await moderation.cancel(deps, HERE, MOD, seq=first.turn.seq)
    await players.act(deps, HERE, ALICE, WALK)  # a cancelled turn gives its place back
    # A server the operator exempts (0: no quota) plays on.
    await shares.set_share(sessions, HERE.guild_id, "operator", member_turns_per_hour=0)
    await players.act(deps, HERE, ALICE, WALK)


async def test_the_operators_changes_are_kept_and_admins_see_the_share_in_force(deps, sessions, settings):
    with pytest.raises(ShareRefused):
        await shares.set_share(sessions, HERE.guild_id, "ops", weight=0)
    with pytest.raises(ShareRefused):
        await shares.set_share(sessions, HERE.guild_id, "ops", turns_per_hour=-1)
    await shares.set_share(sessions, HERE.guild_id, "ops", weight=3)
    before, after = await shares.set_share(sessions, HERE.guild_id, "alice-ops", turns_per_hour=40)
    assert (before.weight, before.turns_per_hour, after.weight, after.turns_per_hour) == (3, None, 3, 40)
    now, changes = await shares.server_changes(sessions, HERE.guild_id)
    assert now == after
    assert [(c.actor, c.before["turns_per_hour"], c.after["turns_per_hour"]) for c in changes] == [
        ("alice-ops", None, 40), ("ops", None, None)]
    assert changes[1].before["weight"] == 1 and changes[1].after["weight"] == 3

    deps = Deps(settings.model_copy(update={"member_turns_per_hour": 5}), sessions, deps.jobs)
    await _playing(deps)
    await players.act(deps, HERE, ALICE, WALK)
    shown = await shares.server_share(deps, HERE)
    assert (shown.quotas.weight, shown.quotas.server, shown.quotas.member, shown.last_hour) == (3, 40, 5, 1)


async def test_the_operator_command_sets_shows_and_refuses(sessions, database_url, monkeypatch, capsys):
    monkeypatch.setenv("ANIMEGAMER_DATABASE_URL", database_url)

    def cli(*argv: str) -> int:
        return main(list(argv))

    assert await asyncio.to_thread(cli, "shares", "set", "555", "--weight", "2.5", "--turns-per-hour", "30", "--by", "ops") == 0
    assert await asyncio.to_thread(cli, "shares", "set", "555", "--turns-per-hour", "default") == 0
    assert await asyncio.to_thread(cli, "shares", "set", "555", "--weight", "0") == 2
    assert "weight must be above 0" in capsys.readouterr().err
    assert await asyncio.to_thread(cli, "shares", "show", "555") == 0
    out = capsys.readouterr().out
    assert "server 555: weight 2.5, turns per hour default, per member default" in out and " by ops: " in out
    share, changes = await shares.server_changes(sessions, 555)
    assert (share.weight, share.turns_per_hour, len(changes)) == (2.5, None, 2)


async def test_a_vote_rounds_winner_waits_for_the_servers_quota_and_not_for_its_proposers(deps, sessions, settings, rounds_due):
    """The channel chose the winner: the server's quota holds (the round stays open until the
    hour lets a turn in, as with a full backlog); its proposer's own quota does not."""
    deps = Deps(settings.model_copy(update={"member_turns_per_hour": 1}), sessions, deps.jobs)
    await shares.set_share(sessions, HERE.guild_id, "operator", turns_per_hour=2)
    await _playing(deps)
    await players.act(deps, HERE, BOB, WALK)
    await players.act(deps, HERE, ALICE, WALK)  # the server's 2 turns of the hour; alice's 1
    await voting.set_mode(deps, HERE, MOD, True, 60)
    proposed = await voting.propose(deps, HERE, ALICE, ActFields("run", "town"))
    await rounds_due()
    assert await voting.close_due(deps, [HERE.guild_id]) == []
    async with sessions() as s:
        assert (await s.get(VoteRound, proposed.round.id)).status == "open"
    await _age_oldest(sessions, 61)  # bob's turn leaves the window: the server has room, alice still none
    (closed,) = await voting.close_due(deps, [HERE.guild_id])
    assert (closed.round.status, closed.round.outcome) == ("closed", "won") and closed.turn is not None
    await voting.set_mode(deps, HERE, MOD, False)
    with pytest.raises(MemberQuota):  # her own turns, the round's included, still count against her
        await players.act(deps, HERE, ALICE, WALK)
