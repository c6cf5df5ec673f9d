"""Every interaction counted by outcome and timed to its acknowledgement, in one place rather than
in each command and button (bot.parts.metrics: animegamer_bot_interactions_total{kind,command,outcome}
and animegamer_bot_ack_seconds{kind}).

Receipt (`received`): AnimeGamerBot.dispatch("interaction"). discord.py's
ConnectionState.parse_interaction_create calls Client.dispatch synchronously, right after it created
the tasks that handle the interaction (the command tree's invoker, a button's callback) and before
any of them ran. `on_interaction` would be too late: it is a task of its own, scheduled after the
handler's, and a handler whose answer goes out without suspending first (a pooled connection, the
request written at once) would answer before on_interaction even started.

Acknowledgement (`trace`): the first body bytes of the interaction's callback POST
(/interactions/{id}/{token}/callback) handed to the connection, seen through aiohttp's request
tracing: a TraceConfig given to the client as its `http_trace` option (public since discord.py
2.0), which discord.py puts on its HTTP session, the one interaction responses are sent on too.
discord.py has no public hook on InteractionResponse: each way to answer (send_message, defer,
send_modal, autocomplete, edit_message...) calls the webhook adapter itself, and wrapping them
means replacing the private cached slot behind Interaction.response and following a class that
grows with Discord's API. The trace sees every answer, those added later included, and measures
what Discord sees: the request leaving, after the connection pool and the event loop's backlog,
not the moment our code asked for it.

Outcome: "ok" unless bot.answers.replies.report said "refused" (a game rule or a check) or "error" (a bug,
an outage). It is counted once, when the task that answered (or reported) ends: a button that
defers first and fails afterwards counts once, as refused or error, never as ok and then error;
and a command's outcome is final once its invoker (its error handler included) is done. A
command or autocomplete whose tree task ended with neither an answer nor a report counts as an
error then (discord.py drops an autocomplete callback's error); any other interaction left
unanswered is not counted, and is forgotten after STALE s.
"""

from __future__ import annotations

import asyncio
import collections
import re
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from bot.parts.acks import AckGate
from bot.parts.metrics import OUTCOMES, BotMetrics, interaction_command, interaction_kind

STALE = 900.0  # seconds: an interaction's token lives 15 minutes
_CALLBACK = re.compile(r"/interactions/(\d+)/[^/]+/callback$")


def callback_interaction_id(method: str, url: Any) -> int | None:
    """The interaction id of an interaction callback POST, else None."""
    if method != "POST":
        return None
    m = _CALLBACK.search(getattr(url, "path", "") or "")
    return int(m.group(1)) if m else None


@dataclass
class _Tracked:
    interaction: Any
    kind: str
    received: float  # time.perf_counter() at receipt
    headers_at: float | None = None  # the callback's headers sent (a fallback for a body-less answer)
    acked: bool = False
    outcome: str = "ok"
    finishing: bool = False  # counted when the task holding it ends


class InteractionMeter:
    def __init__(self, metrics: BotMetrics) -> None:
        self.metrics = metrics
        self._tracked: collections.OrderedDict[int, _Tracked] = collections.OrderedDict()
        self.gate = AckGate()  # commands' work yields to acknowledgements in flight (bot.parts.acks)

    def __len__(self) -> int:
        return len(self._tracked)

    # --- receipt

    def received(self, interaction: Any) -> None:
        kind = interaction_kind(interaction)
        if kind is None:  # a ping: nothing a member did
            return
        now = time.perf_counter()
        self._forget_stale(now)
        self._tracked[int(interaction.id)] = _Tracked(interaction, kind, now)
        self.gate.received(int(interaction.id))

    def _forget_stale(self, now: float) -> None:
        stale = []
        for i, t in self._tracked.items():  # in order of receipt: stop at the first recent one
            if now - t.received <= STALE:
                break
            if not t.finishing:
                stale.append(i)
        for i in stale:
            del self._tracked[i]

    # --- acknowledgement, through aiohttp's tracing

    def trace(self, config: aiohttp.TraceConfig | None = None) -> aiohttp.TraceConfig:
        """A TraceConfig for the client's `http_trace` option (the given one, with the meter's
        callbacks added)."""
        config = config or aiohttp.TraceConfig()
        config.on_request_headers_sent.append(self._on_headers_sent)
        config.on_request_chunk_sent.append(self._on_chunk_sent)
        return config

    async def _on_headers_sent(self, session, ctx, params: aiohttp.TraceRequestHeadersSentParams) -> None:
        # Runs in the task that answers (aiohttp writes the headers there): it is the handler's.
        t = self._callback(params.method, params.url)
        if t is not None and t.headers_at is None:
            t.headers_at = time.perf_counter()
            self._finish_with_current_task(t)

    async def _on_chunk_sent(self, session, ctx, params: aiohttp.TraceRequestChunkSentParams) -> None:
        # The body's first bytes are written right after this (with the headers, coalesced).
        t = self._callback(params.method, params.url)
        if t is not None and not t.acked:
            self._ack(t, time.perf_counter())

    def _callback(self, method: str, url: Any) -> _Tracked | None:
        interaction_id = callback_interaction_id(method, url)
        return None if interaction_id is None else self._tracked.get(interaction_id)

    def _ack(self, t: _Tracked, at: float) -> None:
        t.acked = True
        self.gate.answered(int(t.interaction.id))
        self.metrics.acknowledged(t.kind, at - t.received)

    def handled_in_current_task(self, interaction: Any) -> None:
        """The current task handles the interaction (the command tree's, for commands and
        autocomplete). If it ends with neither an answer nor a report, the interaction is counted
        as an error then and stops holding the ack gate: discord.py logs and drops an autocomplete
        callback's error, and the member's menu says loading the options failed."""
        task = asyncio.current_task()
        if task is None:
            return
        interaction_id = int(interaction.id)

        def ended(_task: asyncio.Task) -> None:
            t = self._tracked.get(interaction_id)
            if t is not None and not t.finishing and not t.acked:  # otherwise the gate has it, or will
                t.outcome = "error"
                self._finish(t)  # which releases the gate

        task.add_done_callback(ended)

    # --- outcome

    def outcome(self, interaction: Any, outcome: str) -> None:
        """What bot.answers.replies.report decided ("refused" or "error"); counted when the task ends."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        t = self._tracked.get(int(interaction.id))
        if t is None:  # never seen (a stale one, or not received through the bot): count it now
            kind = interaction_kind(interaction)
            if kind is not None:
                self.metrics.interaction(kind, interaction_command(interaction), outcome)
            return
        t.outcome = outcome
        self._finish_with_current_task(t)

    def _finish_with_current_task(self, t: _Tracked) -> None:
        if t.finishing:
            return
        t.finishing = True
        task = asyncio.current_task()
        if task is None:
            self._finish(t)
        else:
            task.add_done_callback(lambda _task: self._finish(t))

    def _finish(self, t: _Tracked) -> None:
        self._tracked.pop(int(t.interaction.id), None)
        if not t.acked and t.headers_at is not None:  # answered without a body: its headers are the answer
            self._ack(t, t.headers_at)
        self.gate.answered(int(t.interaction.id))  # answered or not, its handler is done
        self.metrics.interaction(t.kind, interaction_command(t.interaction), t.outcome)
