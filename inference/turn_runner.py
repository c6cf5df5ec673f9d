"""One turn from start to result, in a worker process (inference.worker runs it for each
`generate_turn` job).

The turn runs in a thread (the event loop stays free for procrastinate's heartbeats and the
progress writes); progress is stored on the turn at most once per `progress_interval`
(db.turn_results.record_progress, which also NOTIFYs), with the latest preview of the clip when a
new one was made (previews are made in their own thread, inference.previews, when the turn's
server wants them); the result is written in one transaction with its NOTIFY
(db.turn_results.complete_turn). A failure is recorded on the turn with a message for the players,
and the job ends normally, which releases the session's lock: the next turn uses the last good
turn as its context. A turn still running when the worker's shutdown grace ends is released: the
backend is stopped at its next progress report and the turn goes back to `queued`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time

from sqlalchemy import text

from contracts.turn import Progress, TurnRequest
from db import turn_previews, turn_results
from db.transient import DatabaseStatus, is_transient, retry_transient
from game import turn_texts
from inference import queue
from inference.backend import Backend, BackendError
from inference.metrics import Slots, WorkerMetrics
from inference.previews import PreviewPolicy, Still, TurnPreviews
from settings import Settings

log = logging.getLogger(__name__)


class TurnAborted(Exception):
    """Raised inside the backend's thread (from its progress callback) to stop a released turn."""


class TurnRunner:
    """Runs one turn from start to result; called by the `generate_turn` task."""

    def __init__(self, *, sessions, backend: Backend, settings: Settings, metrics: WorkerMetrics,
                 executor: concurrent.futures.Executor, progress_interval: float, concurrency: int,
                 db_status: DatabaseStatus | None = None, give_up=lambda: False,
                 preview_executor: concurrent.futures.Executor | None = None) -> None:
        self.sessions = sessions
        self.preview_executor = preview_executor  # None: no previews
        self.db_status = db_status
        self.give_up = give_up
        self.backend = backend
        self.settings = settings
        self.metrics = metrics
        self.executor = executor
        self.progress_interval = progress_interval
        self.slots = Slots(concurrency)

    async def _write(self, what: str, fn):
        """Run one transaction `fn(session)`, retried through transient database errors (a
        result computed for minutes is never dropped because the database blinked)."""

        async def once():
            async with self.sessions() as s, s.begin():
                return await fn(s)

        return await retry_transient(once, status=self.db_status, what=what, give_up=self.give_up)

    async def run(self, turn_id: int, job_id: int | None = None) -> str:
        taken = time.monotonic()

        async def start(s):
            request = await turn_results.start_turn(s, turn_id, self.settings.history_window)
            if request is None:
                return None, 0.0
            waited = await s.scalar(text("SELECT EXTRACT(EPOCH FROM now() - created_at)::float FROM turns WHERE id = :id"), {"id": turn_id})
            return request, waited

        request, waited = await self._write(f"starting turn {turn_id}", start)
        if request is None:  # cancelled, already finished (a second delivery), or gone
            return "nothing to do"
        film = request.film_id
        self.metrics.queue_wait.labels(film=film).observe(max(0.0, waited or 0.0))
        log.info("turn %d (session %d, job %s) started after %.2f s in the queue", turn_id, request.session_id, job_id, waited or 0.0)

        slot = self.slots.take()
        self.metrics.running.inc()
        self.metrics.turn_gpu_started()  # the turn's peak memory window (a no-op without CUDA)
        try:
            return await self._generate(request, taken, waited or 0.0, slot)
        finally:
            self.metrics.record_gpu_memory(turn=True)
            self.metrics.running.dec()
            self.metrics.progress.labels(slot=str(slot)).set(0)
            self.slots.give(slot)

    async def _generate(self, request: TurnRequest, taken: float, waited: float, slot: int) -> str:
        turn_id, film = request.turn_id, request.film_id
        abort = threading.Event()
        latest: list[tuple[float, str] | None] = [None]
        still: list[Still | None] = [None]  # the latest preview made (set in the previews' thread)

        def progress(fraction: float, stage: str) -> None:  # runs in the backend's thread
            if abort.is_set():
                raise TurnAborted()
            latest[0] = (float(fraction), str(stage))

        previews = await self._previews(turn_id, still.__setitem__)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.executor, self.backend.generate, request, Progress(progress, previews))
        try:
            sent, sent_still = None, None
            while not future.done():
                await asyncio.wait({future}, timeout=self.progress_interval)
                current, new_still = latest[0], still[0]
                fresh = new_still if new_still is not sent_still else None  # a still is stored once
                if current is not None and (current != sent or fresh is not None) and not future.done():
                    sent, sent_still = current, new_still
                    self.metrics.progress.labels(slot=str(slot)).set(current[0])
                    await self._store_progress(turn_id, *current, fresh, previews)
            result = future.result()
        except asyncio.CancelledError:
            # The shutdown grace is over: stop the backend and hand the turn back.
            abort.set()
            await asyncio.wait({future}, timeout=60)
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: the TurnAborted it ended with is expected
            try:
                await self._write(f"releasing turn {turn_id}", lambda s: turn_results.requeue_turn(s, turn_id))
            except Exception:  # the database is gone too: the sweep of another worker recovers it
                log.warning("turn %d: could not put it back in the queue; the sweep will", turn_id, exc_info=True)
            log.warning("turn %d released on shutdown; it goes back to the queue", turn_id)
            raise queue.TurnReleased(f"turn {turn_id} released on shutdown") from None
        except BackendError as e:
            return await self._fail(turn_id, film, str(e) or "The generator could not make this turn.")
        except Exception as e:
            log.exception("turn %d: backend %s failed", turn_id, self.backend.name)
            return await self._fail(turn_id, film, turn_texts.generator_failed(type(e).__name__))

        elapsed = time.monotonic() - taken
        result.timings = {**result.timings, "queue_wait": waited, "total": elapsed}
        written = await self._write(
            f"storing turn {turn_id}'s result", lambda s: turn_results.complete_turn(s, turn_id, result, self.backend.name)
        )
        if not written:
            log.info("turn %d was already finished or cancelled; result discarded", turn_id)
            return "discarded"
        self.metrics.turns.labels(status="done", film=film).inc()
        self.metrics.turn_seconds.labels(film=film).observe(elapsed)
        self.metrics.observe_stages(film, result.timings)
        log.info("turn %d done in %.2f s", turn_id, elapsed)
        return "done"

    async def _previews(self, turn_id: int, keep) -> TurnPreviews | None:
        """The turn's preview maker, if previews are on (the operator's default, the server's
        choice); `keep(0, still)` is called in the previews' thread with each still."""
        s = self.settings
        if self.preview_executor is None or s.preview_max == 0:
            return None
        try:
            async with self.sessions() as db:
                wanted = await turn_previews.wanted(db, turn_id, s.previews)
        except Exception as e:  # noqa: BLE001  (no previews is no harm)
            log.info("turn %d: no previews (%s)", turn_id, e)
            return None
        return None if not wanted else TurnPreviews(turn_id, lambda made: keep(0, made), self.preview_executor, PreviewPolicy(s.preview_interval, s.preview_max))

    async def _store_progress(self, turn_id: int, fraction: float, stage: str, still: Still | None = None,
                              previews: TurnPreviews | None = None) -> None:
        preview = None if still is None else (still.number, still.data)
        try:
            async with self.sessions() as s, s.begin():
                await turn_results.record_progress(s, turn_id, fraction, stage, preview)
        except Exception as e:  # progress is a courtesy: never fail a turn for it
            if preview is not None and previews is not None:
                previews.failed("stored")
            if is_transient(e):
                if self.db_status is not None:
                    self.db_status.failed(e)
                log.info("turn %d: progress not stored (database unreachable)", turn_id)
            else:
                log.warning("turn %d: progress not stored", turn_id, exc_info=True)

    async def _fail(self, turn_id: int, film: str, message: str) -> str:
        await self._write(f"recording turn {turn_id}'s failure", lambda s: turn_results.fail_turn(s, turn_id, message))
        self.metrics.turns.labels(status="failed", film=film).inc()
        log.warning("turn %d failed: %s", turn_id, message)
        return "failed"
