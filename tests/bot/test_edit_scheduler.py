"""The per-channel edit scheduler on its own (no Discord): merged routine edits, the slot left for
final edits, and a final edit cutting short a routine edit's wait."""

from __future__ import annotations

import time
from types import SimpleNamespace

from bot.parts.edits import EditScheduler, _Channel
from testkit.waits import wait_for


class Recording(EditScheduler):
    """Applies nothing: records (message id, fields, monotonic start) of each edit."""

    def __init__(self, **kw) -> None:
        metrics = SimpleNamespace(edit_waited=lambda seconds: None)
        super().__init__(SimpleNamespace(), metrics, **kw)  # type: ignore[arg-type]
        self.applied: list[tuple[int, dict, float]] = []

    async def _apply(self, channel_id: int, message_id: int, fields: dict):
        self.applied.append((message_id, dict(fields), time.monotonic()))
        return None


async def test_a_newer_routine_edit_is_merged_into_the_waiting_one():
    s = Recording(limit=5, per=5.0)
    s.routine(1, 10, content="first")  # applied at once
    s.routine(1, 11, content="queued", attachments=["preview"])  # waits for the gap
    s.routine(1, 11, content="progress")  # merged: the preview's attachment stays
    await wait_for(lambda: len(s.applied) == 2, timeout=10, interval=0.02, what="the waiting edit applied")
    assert [(m, f) for m, f, _ in s.applied] == [(10, {"content": "first"}), (11, {"content": "progress", "attachments": ["preview"]})]
    await s.close()


async def test_a_final_edit_does_not_wait_for_a_routine_edits_gap():
    s = Recording(limit=5, per=10.0)  # routine edits 2 s apart
    s.routine(1, 10, content="progress")
    s.routine(1, 11, content="progress")  # waits ~2 s for its turn
    await wait_for(lambda: s.applied, timeout=10, interval=0.01, what="the first edit applied")
    t0 = time.monotonic()
    await s.final(1, 12, content="post")
    assert time.monotonic() - t0 < 1.0  # the post went at once, not after the routine edit's gap
    assert [m for m, _, _ in s.applied] == [10, 12]
    await s.close()


def test_routine_edits_leave_the_windows_last_slot_to_final_edits():
    s = Recording(limit=5, per=5.0)
    ch = _Channel(5)
    now = time.monotonic()
    ch.done_at.extend([now - 4.0, now - 3.0, now - 2.0, now - 1.0])  # four edits in the last 5 s
    assert s._wait(ch, final=True) <= 0  # the fifth slot: a post goes now
    assert 0.5 < s._wait(ch, final=False) <= 1.0  # a routine edit waits until the oldest leaves the window
    ch.done_at.append(now)  # five: even a final edit waits for the window
    assert 0.5 < s._wait(ch, final=True) <= 1.0
