"""What the bot stores about a member and their deletion request, and a server's data after the
bot leaves it (service.privacy, service.maintenance), against a real Postgres."""

from __future__ import annotations

from datetime import timedelta

from service import admin, maintenance, players, privacy
from service.deps import Member, Place
from service.players import ActFields

HERE = Place(100, 200)
ALICE, MOD = Member(1, "alice"), Member(9, "mod")


async def test_what_is_stored_here_and_everywhere_and_a_deletion_asked_once(deps):
    assert (await privacy.stored(deps, ALICE.id, HERE.guild_id)).here.empty
    await admin.set_film(deps, HERE, MOD, "qiqi")
    await players.start(deps, HERE, ALICE)
    await players.join(deps, HERE, ALICE, "qiqi")
    await players.act(deps, HERE, ALICE, ActFields("walk", "town"))
    found = await privacy.stored(deps, ALICE.id, HERE.guild_id)
    assert (found.here.games, found.here.turns, found.everywhere.turns, found.servers, found.pending) == (1, 1, 1, 1, False)
    assert (await privacy.stored(deps, ALICE.id, HERE.guild_id + 1)).here.empty  # another server: none of it
    assert await privacy.request_deletion(deps, ALICE.id) is True
    assert await privacy.request_deletion(deps, ALICE.id) is False  # already under way
    assert (await privacy.stored(deps, ALICE.id, HERE.guild_id)).pending


async def test_a_server_left_keeps_its_first_date_until_the_bot_is_back(deps, settings):
    row = await maintenance.left_server(deps, HERE.guild_id)
    assert row.delete_after - row.left_at == timedelta(days=settings.guild_data_days)
    again = await maintenance.left_server(deps, HERE.guild_id)
    assert (again.left_at, again.delete_after) == (row.left_at, row.delete_after)
    assert await maintenance.back_in_server(deps, HERE.guild_id) is True
    assert await maintenance.back_in_server(deps, HERE.guild_id) is False  # nothing left to cancel
