"""Acknowledgements before work: a command's work after its own acknowledgement waits (briefly)
until every interaction received before that moment has been acknowledged too.

Why: one event loop carries every interaction. Under a burst (500 channels starting a game at the
same moment) each acknowledgement needs a few turns of the loop (a new connection: connect, the
transport, the request), and every turn also ran the database work of the commands already
acknowledged, so the burst's last acknowledgements waited behind the first ones' work
(bench/channels.py). Discord expires an interaction not acknowledged within 3 s; the work after
an acknowledgement has 15 minutes. So the work yields to the acknowledgements still in flight.

Bounded both ways: a command waits only for interactions received before it asked (never for
later arrivals, so a steady stream cannot starve it), at most `limit` seconds, and an interaction
that is never acknowledged (no handler, an expired token) stops counting after ACK_DEADLINE.

Receipts and acknowledgements come from bot.interaction_meter, which sees both.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools

import discord

from bot import context

ACK_DEADLINE = 3.0  # seconds: Discord's deadline for an interaction's first answer
WAIT_LIMIT = 1.0  # seconds: the longest a command's work yields to other acknowledgements


async def think(interaction: discord.Interaction) -> None:
    """Every command's and button's first step: acknowledge privately, Discord showing "thinking"
    until the answer follows; then yield to the acknowledgements still in flight."""
    await interaction.response.defer(ephemeral=True, thinking=True)
    await context.bot_of(interaction).interaction_meter.gate.wait()


class AckGate:
    def __init__(self) -> None:
        self._seq = itertools.count(1)
        self._last = 0  # sequence number of the latest receipt
        self._pending: dict[int, int] = {}  # interaction id -> its receipt's sequence number
        self._pending_seqs: set[int] = set()
        self._oldest: list[int] = []  # heap of pending sequence numbers, answered ones popped lazily
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []  # heap: (received up to, tie, future)
        self._tie = itertools.count()

    def pending(self) -> int:
        return len(self._pending)

    def received(self, interaction_id: int) -> None:
        seq = self._last = next(self._seq)
        self._pending[interaction_id] = seq
        self._pending_seqs.add(seq)
        heapq.heappush(self._oldest, seq)
        with contextlib.suppress(RuntimeError):  # no running loop (a unit test): no deadline
            asyncio.get_running_loop().call_later(ACK_DEADLINE, self.answered, interaction_id)

    def answered(self, interaction_id: int) -> None:
        """Acknowledged, ended unanswered, or past Discord's deadline (repeated calls are no-ops)."""
        seq = self._pending.pop(interaction_id, None)
        if seq is None:
            return
        self._pending_seqs.discard(seq)
        oldest = self._oldest_pending()
        while self._waiters and self._waiters[0][0] < oldest:
            fut = heapq.heappop(self._waiters)[2]
            if not fut.done():
                fut.set_result(None)

    async def wait(self, limit: float = WAIT_LIMIT) -> None:
        """Until every interaction received so far has been answered; at most `limit` s."""
        if self._oldest_pending() > self._last:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (self._last, next(self._tie), fut))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(fut, limit)

    def _oldest_pending(self) -> int:
        """The sequence number of the oldest receipt still pending (past the latest when none is)."""
        while self._oldest and self._oldest[0] not in self._pending_seqs:
            heapq.heappop(self._oldest)
        return self._oldest[0] if self._oldest else self._last + 1
