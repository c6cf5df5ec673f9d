"""`animegamer worker`: a long-running process that generates turns.

It serves the queues of one or more films with one backend, loaded once. Each turn runs in a
thread (the event loop stays free for procrastinate's heartbeats and the progress writes);
progress is stored on the turn at most once per `progress_interval` (db.turns.record_progress,
which also NOTIFYs); the result is written in one transaction with its NOTIFY
(db.turns.complete_turn). A failure is recorded on the turn with a message for the players,
and the job ends normally, which releases the session's lock: the next turn uses the last good
turn as its context.

Stopping: SIGTERM or SIGINT stops taking turns and waits up to `grace` seconds for the current
ones; a turn still running then is released: the backend is stopped at its next progress report,
the turn goes back to `queued`, and its job back to `todo` (same job, so the session's order is
kept). A worker killed outright is recovered by the `retry_stalled_jobs` task of the others.

Besides the turn queues, every worker serves the `maintenance` queue with a second, small
procrastinate worker, so that a long turn never delays the stalled-job sweep.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
import subprocess
import threading
import time
from collections.abc import Sequence

from procrastinate import worker as procrastinate_worker
from sqlalchemy import text

from db.runtime import open_database
from settings import Settings
from db import turns as turn_service
from game.catalogue import FILMS
from inference import mp4, queue
from contracts.turn import TurnRequest
from inference.backend import Backend, BackendError
from inference.backends import make_backend
from inference.metrics import WorkerMetrics, start_server

log = logging.getLogger(__name__)

GENERIC_FAILURE = "The generator failed on this turn ({kind}). Try again, or ask a moderator to check the worker's log."


class WorkerStartError(RuntimeError):
    """The worker cannot start; the message says what to fix."""


class TurnAborted(Exception):
    """Raised inside the backend's thread (from its progress callback) to stop a released turn."""


def check_ffmpeg() -> str:
    """The ffmpeg binary, checked to run; a clear WorkerStartError if there is none."""
    try:
        binary = mp4.ffmpeg_binary()
    except mp4.FFmpegMissing as e:
        raise WorkerStartError(str(e)) from None
    try:
        subprocess.run([binary, "-hide_banner", "-version"], capture_output=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise WorkerStartError(f"ffmpeg at {binary} does not run ({e}); install ffmpeg or set ANIMEGAMER_FFMPEG") from None
    return binary


class _Slots:
    """Slot numbers for the per-slot progress gauge (at most `concurrency` turns at once)."""

    def __init__(self, n: int) -> None:
        self.free = list(range(n))

    def take(self) -> int:
        return self.free.pop(0) if self.free else -1

    def give(self, slot: int) -> None:
        if slot >= 0:
            self.free.append(slot)
            self.free.sort()


class TurnRunner:
    """Runs one turn from start to result; called by the `generate_turn` task."""

    def __init__(self, *, sessions, backend: Backend, settings: Settings, metrics: WorkerMetrics,
                 executor: concurrent.futures.Executor, progress_interval: float, concurrency: int) -> None:
        self.sessions = sessions
        self.backend = backend
        self.settings = settings
        self.metrics = metrics
        self.executor = executor
        self.progress_interval = progress_interval
        self.slots = _Slots(concurrency)

    async def run(self, turn_id: int, job_id: int | None = None) -> str:
        taken = time.monotonic()
        async with self.sessions() as s, s.begin():
            request = await turn_service.start_turn(s, turn_id, self.settings.history_window)
            if request is None:  # cancelled, already finished (a second delivery), or gone
                return "nothing to do"
            waited = await s.scalar(text("SELECT EXTRACT(EPOCH FROM now() - created_at)::float FROM turns WHERE id = :id"), {"id": turn_id})
        film = request.film_id
        self.metrics.queue_wait.labels(film=film).observe(max(0.0, waited or 0.0))
        log.info("turn %d (session %d, job %s) started after %.2f s in the queue", turn_id, request.session_id, job_id, waited or 0.0)

        slot = self.slots.take()
        self.metrics.running.inc()
        try:
            return await self._generate(request, taken, waited or 0.0, slot)
        finally:
            self.metrics.running.dec()
            self.metrics.progress.labels(slot=str(slot)).set(0)
            self.slots.give(slot)

    async def _generate(self, request: TurnRequest, taken: float, waited: float, slot: int) -> str:
        turn_id, film = request.turn_id, request.film_id
        abort = threading.Event()
        latest: list[tuple[float, str] | None] = [None]

        def progress(fraction: float, stage: str) -> None:  # runs in the backend's thread
            if abort.is_set():
                raise TurnAborted()
            latest[0] = (float(fraction), str(stage))

        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.executor, self.backend.generate, request, progress)
        try:
            sent = None
            while not future.done():
                await asyncio.wait({future}, timeout=self.progress_interval)
                current = latest[0]
                if current is not None and current != sent and not future.done():
                    sent = current
                    self.metrics.progress.labels(slot=str(slot)).set(current[0])
                    await self._store_progress(turn_id, *current)
            result = future.result()
        except asyncio.CancelledError:
            # The shutdown grace is over: stop the backend and hand the turn back.
            abort.set()
            await asyncio.wait({future}, timeout=60)
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: the TurnAborted it ended with is expected
            async with self.sessions() as s, s.begin():
                await turn_service.requeue_turn(s, turn_id)
            log.warning("turn %d released on shutdown; it goes back to the queue", turn_id)
            raise queue.TurnReleased(f"turn {turn_id} released on shutdown") from None
        except BackendError as e:
            return await self._fail(turn_id, film, str(e) or "The generator could not make this turn.")
        except Exception as e:
            log.exception("turn %d: backend %s failed", turn_id, self.backend.name)
            return await self._fail(turn_id, film, GENERIC_FAILURE.format(kind=type(e).__name__))

        elapsed = time.monotonic() - taken
        result.timings = {**result.timings, "queue_wait": waited, "total": elapsed}
        async with self.sessions() as s, s.begin():
            written = await turn_service.complete_turn(s, turn_id, result, self.backend.name)
        if not written:
            log.info("turn %d was already finished or cancelled; result discarded", turn_id)
            return "discarded"
        self.metrics.turns.labels(status="done", film=film).inc()
        self.metrics.turn_seconds.labels(film=film).observe(elapsed)
        log.info("turn %d done in %.2f s", turn_id, elapsed)
        return "done"

    async def _store_progress(self, turn_id: int, fraction: float, stage: str) -> None:
        try:
            async with self.sessions() as s, s.begin():
                await turn_service.record_progress(s, turn_id, fraction, stage)
        except Exception:  # progress is a courtesy: never fail a turn for it
            log.warning("turn %d: progress not stored", turn_id, exc_info=True)

    async def _fail(self, turn_id: int, film: str, message: str) -> str:
        async with self.sessions() as s, s.begin():
            await turn_service.fail_turn(s, turn_id, message)
        self.metrics.turns.labels(status="failed", film=film).inc()
        log.warning("turn %d failed: %s", turn_id, message)
        return "failed"


class _TurnWorker(procrastinate_worker.Worker):
    async def _persist_job_status(self, *args, **kwargs):
        await super()._persist_job_status(*args, **kwargs)
        # The finished job held a session lock that the session's next turn may be waiting
        # for: look for work now rather than at the next poll.
        self._new_job_event.set()


class Worker:
    """One worker process's worth of work; `await Worker(settings).run()` until `stop()`.

    `backend` is a Backend instance or a backend name (default: settings.backend);
    `backend_options` go to inference.backends.make_backend (preview: render, delay, width...).
    `films`: the films whose queues it serves (default: every film for the preview, else
    settings.default_film). `url` overrides the database URL (default: settings, else the embedded server).
    `metrics_port`: None = settings.metrics_port, 0 = no endpoint, -1 = any free port.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        films: Sequence[str] | None = None,
        backend: Backend | str | None = None,
        backend_options: dict | None = None,
        concurrency: int = 1,
        url: str | None = None,
        metrics_host: str | None = None,
        metrics_port: int | None = None,
        grace: float = 30.0,
        progress_interval: float = 1.0,
        install_signal_handlers: bool = True,
        migrate: bool = True,
        name: str = "animegamer-worker",
    ) -> None:
        backend_name = backend if isinstance(backend, str) else getattr(backend, "name", None) or settings.backend
        # The preview serves every film by default; a model worker the default film, or the films it
        # is given (Mistral loaded once, one adapter and decoder per film: inference.backends.multifilm).
        self.films = tuple(films or (FILMS if backend_name == "preview" else (settings.default_film,)))
        unknown = [f for f in self.films if f not in FILMS]
        if unknown:
            raise WorkerStartError(f"unknown film(s) {', '.join(unknown)}; known: {', '.join(sorted(FILMS))}")
        if concurrency < 1:
            raise WorkerStartError("concurrency must be at least 1")
        self.settings = settings
        self.backend_arg = backend
        self.backend_options = backend_options or {}
        self.backend: Backend | None = None
        self.concurrency = concurrency
        self.url = url
        self.metrics_host = metrics_host or settings.metrics_host
        self.metrics_port = settings.metrics_port if metrics_port is None else metrics_port
        self.bound_metrics_port: int | None = None
        self.grace = grace
        self.progress_interval = progress_interval
        self.install_signal_handlers = install_signal_handlers
        self.migrate = migrate
        self.name = name
        self.ready = asyncio.Event()  # set once the worker takes jobs
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list[procrastinate_worker.Worker] = []

    def stop(self) -> None:
        """Ask the worker to stop (from any thread); run() returns once it has."""
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stop.set)
        else:
            self._stop.set()

    def _health(self) -> dict:
        alive = [w for w in self._workers if w.worker_id is not None]
        return {
            "state": "ready" if self.ready.is_set() else ("stopping" if self._stop.is_set() else "starting"),
            "ok": self.ready.is_set() and len(alive) == len(self._workers) and not self._stop.is_set(),
            "backend": self.backend.name if self.backend else None,
            "films": list(self.films),
            "worker_ids": [w.worker_id for w in self._workers],
            "running_turns": sum(len(w._running_jobs) for w in self._workers[:1]),
        }

    def _build_backend(self) -> Backend:
        if self.backend_arg is None or isinstance(self.backend_arg, str):
            return make_backend(self.settings, self.backend_arg, films=self.films, **self.backend_options)
        return self.backend_arg

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        check_ffmpeg()
        self.backend = self._build_backend()
        metrics = WorkerMetrics(self.backend.name)
        executor = concurrent.futures.ThreadPoolExecutor(self.concurrency, thread_name_prefix="turn")
        http = None
        try:
            # Metrics and signals first: /healthz answers (503) while a model loads for minutes.
            if self.metrics_port:
                http = await self._serve_metrics(metrics)
            self._install_signals()
            async with open_database(self.settings, migrate=self.migrate, url=self.url) as db:
                log.info("loading backend %s for %s", self.backend.name, ", ".join(self.films))
                try:
                    await asyncio.to_thread(self.backend.load)
                except BackendError as e:
                    raise WorkerStartError(f"cannot load the {self.backend.name} backend: {e}") from e
                if not self._stop.is_set():
                    await self._serve(db, metrics, executor)
        finally:
            self.ready.clear()
            self._remove_signals()
            if http is not None:
                await http.cleanup()
            executor.shutdown(wait=False, cancel_futures=True)
        log.info("worker stopped")

    async def _serve_metrics(self, metrics: WorkerMetrics):
        try:
            http, self.bound_metrics_port = await start_server(metrics, self.metrics_host, max(0, self.metrics_port), self._health)
        except OSError as e:
            raise WorkerStartError(
                f"cannot serve metrics on {self.metrics_host}:{self.metrics_port} ({e}); "
                "choose another ANIMEGAMER_METRICS_PORT or --metrics-port (0 = off)"
            ) from None
        return http

    async def _serve(self, db, metrics: WorkerMetrics, executor) -> None:
        """Run the turn worker and the maintenance worker until stop() (or until one dies)."""
        stalled_after = self.settings.stalled_after
        runner = TurnRunner(
            sessions=db.sessions, backend=self.backend, settings=self.settings, metrics=metrics,
            executor=executor, progress_interval=self.progress_interval, concurrency=self.concurrency,
        )
        app = queue.make_app(db.url, stalled_after=stalled_after, pool_size=self.concurrency + 3)
        common = dict(
            install_signal_handlers=False, update_heartbeat_interval=min(10.0, stalled_after / 4),
            stalled_worker_timeout=stalled_after,
        )
        turns = _TurnWorker(
            app, queues=queue.queues_for(self.films), name=self.name, concurrency=self.concurrency,
            fetch_job_polling_interval=self.settings.queue_poll_interval, shutdown_graceful_timeout=self.grace,
            additional_context={"turn_runner": runner}, **common,
        )
        maintenance = procrastinate_worker.Worker(
            app, queues=[queue.MAINTENANCE_QUEUE], name=f"{self.name}-maintenance", concurrency=1,
            fetch_job_polling_interval=1.0, listen_notify=False, delete_jobs="always",
            additional_context={"sessions": db.sessions, "stalled_after": stalled_after}, **common,
        )
        self._workers = [turns, maintenance]
        async with app.open_async():
            tasks = [asyncio.create_task(w.run(), name=w.worker_name) for w in self._workers]
            while not all(w.worker_id for w in self._workers) and not any(t.done() for t in tasks):
                await asyncio.sleep(0.01)
            self.ready.set()
            log.info("worker ready: backend %s, films %s, concurrency %d", self.backend.name, ", ".join(self.films), self.concurrency)
            stop_wait = asyncio.create_task(self._stop.wait())
            await asyncio.wait([stop_wait, *tasks], return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
            unexpected = not self._stop.is_set()
            for w in self._workers:
                w.stop()
            for r in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(r, BaseException):
                    raise r
            if unexpected:
                raise RuntimeError("a queue worker stopped on its own (database gone?); see the log above")

    def _install_signals(self) -> None:
        if not self.install_signal_handlers or threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, self.stop)

    def _remove_signals(self) -> None:
        if not self.install_signal_handlers or threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.remove_signal_handler(sig)
