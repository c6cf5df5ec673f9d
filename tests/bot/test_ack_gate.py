"""bot.parts.acks: acknowledgements are sent in order of asking, a bounded number at a time, each
slot freed as its body leaves; a command's work after its acknowledgement waits for the
interactions received before it to be acknowledged, never for later ones, never past its limit,
and an interaction that is never answered stops counting at Discord's deadline. On the real bot,
the meter feeds it (receipts from the client's dispatch, acknowledgements from the callback POST),
and a deferral the bare POST could not send goes out through discord.py's defer."""

from __future__ import annotations

import asyncio

from bot.parts import acks
from bot.parts.acks import AckGate
from testkit.fake_discord.interactions import CHANNEL_MESSAGE, DEFERRED_CHANNEL_MESSAGE
from testkit.waits import loop_turns, wait_for
from tests.bot.helpers import answer, say

# The gate is pure asyncio (no I/O, no timer but its limits): what it releases runs within a few
# turns of the loop, so "not released" is checked after SETTLE turns, not after a time.
SETTLE = 20


async def _started(coro) -> asyncio.Task:
    task = asyncio.ensure_future(coro)
    await loop_turns()
    return task


async def test_work_waits_for_earlier_receipts_only():
    gate = AckGate()
    for i in (1, 2, 3):
        gate.received(i)
    gate.answered(1)  # 1 acknowledged itself and goes on to its work
    first = await _started(gate.wait())
    gate.received(4)  # arrives after: not waited for
    gate.answered(3)
    await loop_turns(SETTLE)
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
    monkeypatch.setattr(acks, "ACK_DEADLINE", 0.05)
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
        await loop_turns(SETTLE)
        assert [w.done() for w in waiters] == [j <= i for j in range(1, 6)]


async def test_acknowledgements_take_slots_in_order_of_asking():
    gate = AckGate(slots=2)
    order: list[int] = []
    release: dict[int, asyncio.Event] = {i: asyncio.Event() for i in range(1, 6)}

    async def send(i: int) -> None:
        async with gate.sending(i):
            order.append(i)
            await release[i].wait()

    tasks = [asyncio.ensure_future(send(i)) for i in range(1, 6)]
    await loop_turns(SETTLE)
    assert order == [1, 2]  # two slots
    gate.answered(2)  # 2's body left: its slot goes to the next in line although its block goes on
    await loop_turns(SETTLE)
    assert order == [1, 2, 3]
    release[1].set()  # 1's block ended
    await loop_turns(SETTLE)
    assert order == [1, 2, 3, 4]
    tasks[4].cancel()  # 5 gives up waiting: it takes no slot and holds none
    for i in (2, 3, 4):
        release[i].set()
    await asyncio.gather(*tasks[:4])
    assert order == [1, 2, 3, 4]
    async with gate.sending(6), gate.sending(7):  # every slot free again
        pass


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
    for h in handles:  # one bare POST each, no callback body asked for
        assert [c.request.query.get("with_response") for c in h.callbacks] == [None]


async def test_a_deferral_the_bare_post_could_not_send_goes_out_through_discord_py(world, start_bot):
    w = world
    await start_bot()
    w.server.fail_next("POST", route="/interactions/{interaction_id}/{token}/callback", status=503)
    h = await w.server.slash(w.guild, w.games, w.alice, "help", {})
    first = await h.wait_response(timeout=5)
    assert first.type == DEFERRED_CHANNEL_MESSAGE and first.ephemeral
    assert first.request.query.get("with_response") == "1"  # discord.py's defer sent it
    text, embeds, ephemeral = await answer(h)
    assert ephemeral and "/game start" in text + str(embeds)


async def test_the_tree_acknowledges_before_the_checks_unless_the_command_answers_itself(world, start_bot):
    w = world
    await start_bot()
    # carol has no rights: the admin cog's check refuses, after the tree's acknowledgement
    h = await w.server.slash(w.guild, w.games, w.carol, "admin film", {"film": "qiqi"})
    first = await h.wait_response(timeout=5)
    assert first.type == DEFERRED_CHANNEL_MESSAGE and first.ephemeral
    text, _, ephemeral = await answer(h)
    assert ephemeral and "Manage Server" in text
    # /privacy delete's first answer is its confirmation with a button (marked answers_itself)
    h = await w.server.slash(w.guild, w.games, w.alice, "privacy delete", {})
    first = await h.wait_response(timeout=5)
    assert first.type == CHANNEL_MESSAGE and first.ephemeral
    assert any(c.startswith("ag:privacy:delete:") for c in first.message.custom_ids)


async def test_an_autocomplete_that_fails_is_an_error_and_stops_counting_when_its_handler_ends(world, start_bot, monkeypatch, caplog):
    """discord.py logs and drops an autocomplete callback's error: no answer ever goes out. When
    the tree's task ends, the meter counts it as an error and the gate lets go of it (not at the
    deadline), so other commands' work does not wait for it."""
    w = world
    bot = await start_bot()

    async def down(*args, **kwargs):
        raise RuntimeError("the configuration is unreachable")

    monkeypatch.setattr(bot.config, "live_game", down)
    monkeypatch.setattr(acks, "ACK_DEADLINE", 60.0)  # only the task's end can release it here
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    h = await w.server.autocomplete(w.guild, w.games, w.alice, "game join", {"character": "q"}, focused="character")
    # the callback failed, as discord.py reports it
    await wait_for(lambda: "Ignoring exception in autocomplete" in caplog.text, timeout=5, interval=0.02, what="discord.py's report")
    await wait_for(lambda: bot.interaction_meter.gate.pending() == 0, timeout=5, what="the task's done callbacks")
    assert not h.responded
    await asyncio.wait_for(bot.interaction_meter.gate.wait(limit=5), 0.5)  # nothing holds work back
    labels = {"kind": "autocomplete", "command": "game join", "outcome": "error"}
    assert bot.metrics.registry.get_sample_value("animegamer_bot_interactions_total", labels) == 1.0
