"""Acknowledgements before work. The command tree acknowledges every slash and context-menu
command before it looks the command up (`acknowledge_command`, from GameTree.interaction_check),
unless the command answers itself (`@answers_itself`: a first answer with a view, say); every
button starts with `think` itself. Both send `acknowledge`: a private deferral ("thinking"), sent
in order of arrival at most SENDING_AT_ONCE at a time, as one bare POST (bot.parts.discord_adapter); then
the work waits (briefly) until every interaction received before that moment has been
acknowledged too.

Before the look-up: the arguments' conversion, the cog's and the command's checks and the
handler then run after every earlier arrival was acknowledged, not in front of them. A check that
refuses, or an argument that does not convert, answers through the follow-up (bot.answers.replies).

Why: one event loop carries every interaction. Under a burst (500 channels starting a game at the
same moment) each acknowledgement needs a few turns of the loop (a new connection: connect, the
transport, the request), and every turn also ran the database work of the commands already
acknowledged, so the burst's last acknowledgements waited behind the first ones' work
(bench/channels.py). Discord expires an interaction not acknowledged within 3 s; the work after
an acknowledgement has 15 minutes. So the work yields to the acknowledgements still in flight.

In order rather than all at once: each acknowledgement needs a few turns of the loop, and with
all 500 in flight every turn carried all of them, so the first left as late as the last, and each
opened its own connection. In slots, released when the request's body has left (not at Discord's
answer, a round trip later), they leave in order of arrival and reuse the connections the earlier
ones freed.

Bounded both ways: a command waits only for interactions received before it asked (never for
later arrivals, so a steady stream cannot starve it), at most `limit` seconds, and an interaction
that is never acknowledged (no handler, an expired token) stops counting after ACK_DEADLINE.

Receipts and acknowledgements come from bot.parts.interaction_meter, which sees both.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
from typing import Any, Protocol

import discord

from bot.parts import discord_adapter

ACK_DEADLINE = 3.0  # seconds: Discord's deadline for an interaction's first answer
WAIT_LIMIT = 1.0  # seconds: the longest a command's work yields to other acknowledgements
SENDING_AT_ONCE = 32  # acknowledgements being sent at a time (8 and 32 measured alike)
ANSWERS_ITSELF = "__answers_itself__"  # set on a command's callback whose handler gives the first answer


def answers_itself(func):
    """Marks a command whose handler gives the first answer itself (not acknowledged by the tree)."""
    setattr(func, ANSWERS_ITSELF, True)
    return func


async def think(interaction: discord.Interaction[Any]) -> None:
    """A button's first step: acknowledge privately ("thinking" until the answer follows), then
    yield to the acknowledgements still in flight."""
    client: Gated = interaction.client
    await acknowledge(interaction, client.interaction_meter.gate)


async def acknowledge_command(interaction: discord.Interaction, gate: AckGate) -> None:
    """The tree's acknowledgement of an application command (not of its autocomplete)."""
    if interaction.type is not discord.InteractionType.application_command or interaction.response.is_done():
        return
    command = interaction.command
    if command is not None and getattr(command.callback, ANSWERS_ITSELF, False):
        return
    await acknowledge(interaction, gate)


async def acknowledge(interaction: discord.Interaction, gate: AckGate) -> None:
    """Acknowledge privately, Discord showing "thinking" until the answer follows; then yield to
    the acknowledgements still in flight."""
    async with gate.sending(int(interaction.id)):
        if not await discord_adapter.defer_thinking_privately(interaction):
            await interaction.response.defer(ephemeral=True, thinking=True)
    await gate.wait()


class Metered(Protocol):
    @property
    def gate(self) -> AckGate: ...


class Gated(Protocol):
    """What `think` reads of the client (bot.client's AnimeGamerBot; typed here, not imported, so the
    client can import this module: no import circle)."""

    @property
    def interaction_meter(self) -> Metered: ...


class AckGate:
    def __init__(self, slots: int = SENDING_AT_ONCE) -> None:
        self._slots = slots
        self._seq = itertools.count(1)
        self._last = 0  # sequence number of the latest receipt
        # interaction id -> its receipt's sequence number, in order of receipt: the first is the oldest
        self._pending: collections.OrderedDict[int, int] = collections.OrderedDict()
        # (received up to, future), in order of asking: `received up to` never decreases
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        self._sending: set[int] = set()  # interactions whose acknowledgement holds a slot
        self._slot_waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @contextlib.asynccontextmanager
    async def sending(self, interaction_id: int):
        """A slot to send the interaction's acknowledgement in, in order of asking; freed when its
        body has left (`answered`) or when the block ends, whichever comes first."""
        if len(self._sending) < self._slots and not self._slot_waiters:
            self._sending.add(interaction_id)
        else:
            handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._slot_waiters.append((interaction_id, handed))
            try:
                await handed  # _free_slot hands this one its slot
            except asyncio.CancelledError:
                if handed.done() and not handed.cancelled():
                    self._free_slot(interaction_id)
                raise
        try:
            yield
        finally:
            self._free_slot(interaction_id)

    def _free_slot(self, interaction_id: int) -> None:
        if interaction_id not in self._sending:
            return
        self._sending.discard(interaction_id)
        while self._slot_waiters:
            waiting_id, handed = self._slot_waiters.popleft()
            if not handed.done():  # not cancelled meanwhile
                self._sending.add(waiting_id)
                handed.set_result(None)
                return

    def pending(self) -> int:
        return len(self._pending)

    def received(self, interaction_id: int) -> None:
        self._last = next(self._seq)
        self._pending[interaction_id] = self._last
        with contextlib.suppress(RuntimeError):  # no running loop (a unit test): no deadline
            asyncio.get_running_loop().call_later(ACK_DEADLINE, self.answered, interaction_id)

    def answered(self, interaction_id: int) -> None:
        """Acknowledged, ended unanswered, or past Discord's deadline (repeated calls are no-ops)."""
        self._free_slot(interaction_id)
        if self._pending.pop(interaction_id, None) is None:
            return
        oldest = self._oldest_pending()
        while self._waiters and self._waiters[0][0] < oldest:
            fut = self._waiters.popleft()[1]
            if not fut.done():
                fut.set_result(None)

    async def wait(self, limit: float = WAIT_LIMIT) -> None:
        """Until every interaction received so far has been answered; at most `limit` s."""
        if self._oldest_pending() > self._last:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((self._last, fut))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(fut, limit)

    def _oldest_pending(self) -> int:
        """The sequence number of the oldest receipt still pending (past the latest when none is)."""
        return next(iter(self._pending.values()), self._last + 1)
