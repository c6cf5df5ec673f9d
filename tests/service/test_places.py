"""The place a member is told (/queue: service.listings; the page: service.views) is the turn's
place in the fair order (inference.queue.queue_positions), not its place in submission order: a
lone server's turn is told it goes next to a flood's, and a flooding server's channels alternate."""

from __future__ import annotations

from service import admin, listings, players, views
from service.deps import Deps, Member, Place
from service.players import ActFields

ALICE, BOB, MOD = Member(1, "alice"), Member(2, "bob"), Member(9, "mod")
WALK = ActFields("walk", "town")
FLOOD_A, FLOOD_B, LONE = Place(100, 200), Place(100, 201), Place(300, 400)


async def _playing(deps: Deps, place: Place) -> None:
    await admin.set_film(deps, place, MOD, "qiqi")
    await players.start(deps, place, ALICE)
    await players.join(deps, place, ALICE, "qiqi")


async def test_the_places_told_are_the_fair_orders(deps):
    for place in (FLOOD_A, FLOOD_B, LONE):
        await _playing(deps, place)
    for _ in range(3):
        await players.act(deps, FLOOD_A, ALICE, WALK)  # the flood's first channel queues first
    for _ in range(3):
        await players.act(deps, FLOOD_B, ALICE, WALK)
    lone = await players.act(deps, LONE, ALICE, WALK)  # last in, first come, first served: place 7
    assert lone.position == 2  # behind one turn of the other server only
    assert [p.position for p in await listings.waiting(deps, LONE)] == [2]
    # The flood's channels alternate: A, (lone), B, A, B, A, B.
    assert [p.position for p in await listings.waiting(deps, FLOOD_A)] == [1, 4, 6]
    assert [p.position for p in await listings.waiting(deps, FLOOD_B)] == [3, 5, 7]
    page = await views.turns_page(deps, FLOOD_B, only_pending=True)
    assert [p.position for p in page.turns] == [3, 5, 7]
    one = await views.turn(deps, LONE, lone.turn.id)
    assert one is not None and one.turn.position == 2
