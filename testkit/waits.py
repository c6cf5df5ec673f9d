"""Waiting in tests: on the event or condition a test expects, with a deadline, never for a fixed
time. A fixed sleep is too short on a loaded machine (a flaky failure) and too long everywhere
else (a slow suite); a wait on the condition is as short as the machine allows.

- `wait_for(condition, timeout)`: poll a condition (a plain or an async callable) until it is
  truthy and return its value; fail the test, naming what was awaited, at the deadline.
- `wait_for_sync(...)`: the same for code that runs outside an event loop (threads, processes).
- `loop_turns(n)`: let the event loop run what is ready now (a yield, no time at all): for unit
  tests of pure asyncio code, where "nothing else happened" means "nothing was ready to run".

Proving that something did NOT happen: wait for a later event that must come after it (a marker
request, the component's own "done" signal), then look; the fake Discord's `wait_until` and
`wait_for_request` wait on its request log the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Callable
from typing import Any


async def wait_for(condition: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll `condition()` (awaited when it returns an awaitable) every `interval` seconds until it
    is truthy, and return that value; AssertionError after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s")
        await asyncio.sleep(interval)  # sleep: the poll interval between looks at the condition


def wait_for_sync(condition: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> Any:
    """`wait_for` for code outside an event loop: blocks the calling thread between polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s")
        time.sleep(interval)  # sleep: the poll interval between looks at the condition


async def loop_turns(n: int = 1) -> None:
    """Let the event loop run `n` rounds of what is ready (callbacks, woken tasks); no timer."""
    for _ in range(n):
        await asyncio.sleep(0)  # sleep: zero seconds, a yield to the event loop


class Passes:
    """Counts the passes of an async method, wrapped on one object (a test's spy: the object calls
    it through `self`, so the wrapper sees every call), to wait for a pass that STARTED after a
    given moment to end: the component's own "done" signal. `mark()` returns the moment (the
    number of passes started so far); `await passes.after(mark)` returns once a pass started
    after it has ended."""

    def __init__(self, obj: Any, name: str) -> None:
        self.started = 0
        self.ended: list[int] = []  # the start number of each pass that ended
        self._changed = asyncio.Event()
        original = getattr(obj, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.started += 1
            number = self.started
            try:
                return await original(*args, **kwargs)
            finally:
                self.ended.append(number)
                self._changed.set()

        setattr(obj, name, counted)

    def mark(self) -> int:
        return self.started

    async def after(self, mark: int, timeout: float = 30.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not any(n > mark for n in self.ended):
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no pass started after #{mark} ended within {timeout} s ({self.started} started)")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
