"""bot.ack_gate: a command's work after its acknowledgement waits for the interactions received
before it to be acknowledged, never for later ones, never past its limit, and an interaction that
is never answered stops counting at Discord's deadline. On the real bot, the meter feeds it:
receipts from the client's dispatch, acknowledgements from the callback POST."""

from __future__ import annotations

import asyncio

from bot import ack_gate
from bot.ack_gate import AckGate
from tests.bot.helpers import answer
from tests.fake_discord.interactions import DEFERRED_CHANNEL_MESSAGE


async def _started(coro) -> asyncio.Task:
    task = asyncio.ensure_future(coro)
    await asyncio.sleep(0)
    return task


async def test_work_waits_for_earlier_receipts_only():
    gate = AckGate()
    for i in (1, 2, 3):
        gate.received(i)
    gate.answered(1)  # 1 acknowledged itself and goes on to its work
    first = await _started(gate.wait())
    gate.received(4)  # arrives after: not waited for
    gate.answered(3)
    await asyncio.sleep(0)
    assert not first.done()  # 2 is still unacknowledged
    gate.answered(2)
    await asyncio.wait_for(first, 1)
    assert gate.pending() == 1  # 4

    gate.answered(4)
    gate.answered(4)  # twice (acknowledged, then its handler ended): no-op
    await asyncio.wait_for(gate.wait(), 0.1)  # nothing pending: no wait at all


async def test_the_wait_is_bounded():
    gate = AckGate()
    gate.received(1)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await gate.wait(limit=0.05)
    assert 0.04 <= loop.time() - t0 < 1.0
    assert gate.pending() == 1


async def test_an_unanswered_interaction_stops_counting_at_the_deadline(monkeypatch):
    monkeypatch.setattr(ack_gate, "ACK_DEADLINE", 0.05)
    gate = AckGate()
    gate.received(1)  # never answered (no handler, say)
    waiting = await _started(gate.wait(limit=5))
    await asyncio.wait_for(waiting, 1)
    assert gate.pending() == 0


async def test_many_waiters_released_in_order_of_their_receipts():
    gate = AckGate()
    waiters = []
    for i in range(1, 6):
        gate.received(i)
        waiters.append(await _started(gate.wait()))  # each waits for 1..i
    for i in range(1, 6):
        gate.answered(i)
        await asyncio.sleep(0.01)
        assert [w.done() for w in waiters] == [j <= i for j in range(1, 6)]


async def test_a_burst_on_the_real_bot_is_acknowledged_then_answered(world, start_bot):
    w = world
    bot = await start_bot()
    members = [w.alice, w.bob, w.carol, w.dave, w.erin] * 2
    handles = await asyncio.gather(*(w.server.slash(w.guild, w.games, m, "help", {}) for m in members))
    for h in handles:
        first = await h.wait_response(timeout=5)
        assert first.type == DEFERRED_CHANNEL_MESSAGE and first.ephemeral  # "thinking", privately
        text, embeds, ephemeral = await answer(h)
        assert ephemeral and "/game start" in text + str(embeds)
    assert bot.interaction_meter.gate.pending() == 0  # each receipt was matched by its acknowledgement
