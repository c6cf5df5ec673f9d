"""`animegamer worker`: a long-running process that generates turns.

It serves the queues of one or more films with one backend, loaded once; each turn is run by
inference.turn_runner (in a thread, its progress and result written to the turn).

Stopping: SIGTERM or SIGINT stops taking turns and waits up to `grace` seconds for the current
ones; a turn still running then is released: the backend is stopped at its next progress report,
the turn goes back to `queued`, and its job back to `todo` (same job, so the session's order is
kept). A worker killed outright is recovered by the sweep (inference.queue.sweep) of the others,
which every worker runs every few seconds from its event loop (a long turn never delays it).

The database going away never stops a worker: it keeps its loaded backend, reconnects with
capped, jittered backoff, keeps a finished turn's result in memory until it is written, and says
meanwhile that it is cut off (log, `animegamer_database_up` = 0, /healthz 503). It exits only on
SIGTERM/SIGINT or a start error (bad settings, unknown film, a database that refuses the
configured credentials or has no such database).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import signal
import subprocess
import threading
import time
from collections.abc import Sequence

from db.runtime import open_database
from db.transient import DatabaseStatus, backoff, is_transient, retry_transient
from game.catalogue import FILMS
from inference import mp4, queue
from inference.backend import Backend, BackendError
from inference.backends import make_backend
from inference.metrics import WorkerMetrics, decoder_preset, start_server
from inference.procrastinate_adapter import TurnWorker
from inference.turn_runner import TurnRunner
from settings import Settings

log = logging.getLogger(__name__)


class WorkerStartError(RuntimeError):
    """The worker cannot start; the message says what to fix."""


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
        self.db_status = DatabaseStatus("database")
        self.metrics: WorkerMetrics | None = None
        self.sweeps = 0  # sweep passes run (tests, /healthz)
        self._stop = asyncio.Event()
        self._stop_deadline: float | None = None  # after this, database writes stop being retried
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turns: TurnWorker | None = None
        self._preview_executor: concurrent.futures.Executor | None = None  # made in run()

    def stop(self) -> None:
        """Ask the worker to stop (from any thread); run() returns once it has."""
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._set_stop)
        else:
            self._set_stop()

    def _set_stop(self) -> None:
        if self._stop_deadline is None:
            # Running turns get `grace`; writes then get a little longer before being left to the sweep.
            self._stop_deadline = time.monotonic() + self.grace + 10
        self._stop.set()

    def _giving_up(self) -> bool:
        return self._stop_deadline is not None and time.monotonic() > self._stop_deadline

    def _health(self) -> dict:
        turns = self._turns
        alive = turns is not None and turns.worker_id is not None
        return {
            "state": "stopping" if self._stop.is_set() else ("ready" if self.ready.is_set() else "starting"),
            "ok": self.ready.is_set() and alive and self.db_status.up and not self._stop.is_set(),
            "database": "up" if self.db_status.up else "unreachable",
            "database_error": None if self.db_status.up else self.db_status.last_error,
            "backend": self.backend.name if self.backend else None,
            "films": list(self.films),
            "worker_ids": [turns.worker_id] if turns is not None else [],
            "running_turns": turns.running_jobs() if turns is not None else 0,
        }

    def _build_backend(self) -> Backend:
        if self.backend_arg is None or isinstance(self.backend_arg, str):
            return make_backend(self.settings, self.backend_arg, films=self.films,
                                sessions=min(self.concurrency, self.settings.mllm_max_batch), **self.backend_options)
        return self.backend_arg

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        check_ffmpeg()
        self.backend = self._build_backend()
        metrics = self.metrics = WorkerMetrics(self.backend.name)
        metrics.set_decoder_preset(decoder_preset(self.backend, self.settings.decoder_speed))
        self.db_status.on_change = lambda up: metrics.database_up.set(1 if up else 0)
        executor = concurrent.futures.ThreadPoolExecutor(self.concurrency, thread_name_prefix="turn")
        self._preview_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="preview")
        http = None
        try:
            # Metrics and signals first: /healthz answers (503) while a model loads for minutes.
            if self.metrics_port:
                http = await self._serve_metrics(metrics)
            self._install_signals()
            async with open_database(self.settings, url=self.url) as db:
                await self._check_database(db)
                if self.migrate:
                    await self._migrate(db)
                if self.backend.name == "animegamer":
                    await asyncio.to_thread(self._check_gpu_memory)
                log.info("loading backend %s for %s", self.backend.name, ", ".join(self.films))
                try:
                    await asyncio.to_thread(self.backend.load)
                except BackendError as e:
                    raise WorkerStartError(f"cannot load the {self.backend.name} backend: {e}") from e
                metrics.record_gpu_memory()  # what the loaded models hold, before any turn
                if not self._stop.is_set():
                    await self._serve(db, metrics, executor)
        finally:
            self.ready.clear()
            self._remove_signals()
            if http is not None:
                await http.cleanup()
            executor.shutdown(wait=False, cancel_futures=True)
            self._preview_executor.shutdown(wait=False, cancel_futures=True)
        log.info("worker stopped")

    def _check_gpu_memory(self) -> None:
        """Refuse a memory mode the memory plan predicts will not fit this machine's GPUs."""
        from inference.memory.choose_mode import refusal

        why = refusal(self.settings, sessions=min(self.concurrency, self.settings.mllm_max_batch))
        if why:
            raise WorkerStartError(why)

    async def _check_database(self, db) -> None:
        """Wait for a database that is not up yet (a transient error: refused, starting up...);
        any other error (wrong credentials, no such database, no socket directory) is a start
        error, whose message names the URL (password masked) and what is missing."""
        from asyncpg import PostgresError
        from sqlalchemy.exc import DBAPIError

        from db.engine import describe_database_error

        async def attempt():
            if not self._stop.is_set():
                await db.ping()

        try:
            await retry_transient(attempt, status=self.db_status, what="connecting to the database", give_up=self._stop.is_set, cap=10.0)
        except (DBAPIError, PostgresError, OSError) as e:  # PostgresError: older SQLAlchemy lets asyncpg's through
            raise WorkerStartError(describe_database_error(db.url, e)) from e

    async def _migrate(self, db) -> None:
        from db.migrate import upgrade

        async def attempt():
            if not self._stop.is_set():
                await upgrade(db.engine)

        await retry_transient(attempt, status=self.db_status, what="applying migrations", give_up=self._stop.is_set, cap=10.0)

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
        """Run the turn worker and the sweep until stop(). A turn worker that ends on its own
        (it should not: its job manager rides through outages) is started again, with backoff;
        the backend stays loaded."""
        stalled_after = self.settings.stalled_after
        backend = self.backend
        if backend is None:  # run() builds it before serving
            raise RuntimeError("the worker serves only once its backend is built")
        runner = TurnRunner(
            sessions=db.sessions, backend=backend, settings=self.settings, metrics=metrics,
            executor=executor, progress_interval=self.progress_interval, concurrency=self.concurrency,
            db_status=self.db_status, give_up=self._giving_up, preview_executor=self._preview_executor,
        )
        app = queue.make_app(db.url, pool_size=self.concurrency + 3, status=self.db_status, give_up=self._giving_up,
                             order=self.settings.queue_order)
        try:
            await app.open_async()
        except Exception as e:  # the pool exists and keeps connecting; the worker waits for it
            if not is_transient(e):
                raise
            self.db_status.failed(e)
        sweeper = asyncio.create_task(self._sweep_loop(db, app, stalled_after), name="sweep")
        delays = backoff(1.0, 30.0)
        try:
            while not self._stop.is_set():
                self._turns = TurnWorker(
                    app, queues=queue.queues_for(self.films), name=self.name, concurrency=self.concurrency,
                    fetch_job_polling_interval=self.settings.queue_poll_interval, shutdown_graceful_timeout=self.grace,
                    additional_context={"turn_runner": runner}, install_signal_handlers=False,
                    update_heartbeat_interval=queue.heartbeat_interval(stalled_after), stalled_worker_timeout=stalled_after,
                )
                task = asyncio.create_task(self._turns.run(), name=self.name)
                if await self._wait_registered(task) and not self.ready.is_set():
                    self.ready.set()
                    log.info("worker ready: backend %s, films %s, concurrency %d", backend.name, ", ".join(self.films), self.concurrency)
                stop_wait = asyncio.create_task(self._stop.wait())
                await asyncio.wait([stop_wait, task], return_when=asyncio.FIRST_COMPLETED)
                stop_wait.cancel()
                self._turns.stop()
                try:
                    await task
                except Exception as e:
                    if self._stop.is_set():
                        log.warning("turn worker ended with %s while stopping", e)
                        break
                    log.error("the turn worker stopped (%s); starting it again, the backend stays loaded", e, exc_info=True)
                if self._stop.is_set():
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), next(delays))
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            with contextlib.suppress(Exception):
                await asyncio.wait_for(app.close_async(), 10)

    async def _wait_registered(self, task: asyncio.Task) -> bool:
        """Until the turn worker has its worker row (it waits for the database if it must)."""
        turns = self._turns
        if turns is None:  # _serve sets it before waiting
            return False
        while turns.worker_id is None and not task.done() and not self._stop.is_set():
            await asyncio.sleep(0.01)
        return turns.worker_id is not None

    async def _sweep_loop(self, db, app, stalled_after: float) -> None:
        """Every few seconds: recover dead workers' turns and repair lost status writes
        (inference.queue.sweep), hourly: prune old finished jobs. Heartbeats are judged only once
        this process has reached the database for `stalled_after` seconds in a row: just after an
        outage every worker's heartbeat looks old."""
        interval = queue.sweep_interval(stalled_after)
        next_prune = time.monotonic() + 60
        while not self._stop.is_set():
            try:
                judge = self.db_status.up and self.db_status.up_for() >= stalled_after
                async with db.sessions() as s, s.begin():
                    report = await queue.sweep(s, stalled_after, judge_heartbeats=judge)
                self.db_status.ok()
                self.sweeps += 1
                if report.retried:
                    log.warning("retried %d job(s) of dead workers: %s", len(report.retried), report.retried)
                if report.pruned_workers:
                    log.warning("removed %d dead worker row(s): %s", len(report.pruned_workers), report.pruned_workers)
                if report.finished:
                    log.warning("finished %d job(s) left running after their turn's result: %s", len(report.finished), report.finished)
                if report.lost:
                    log.warning("failed %d turn(s) whose job ended without a result: %s", len(report.lost), report.lost)
                if time.monotonic() > next_prune:
                    await queue.prune_finished_jobs(app)
                    next_prune = time.monotonic() + 3600
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if is_transient(e):
                    self.db_status.failed(e)
                else:
                    log.exception("sweep failed")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)

    def _install_signals(self) -> None:
        loop = self._loop  # set by run() first
        if loop is None or not self.install_signal_handlers or threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)

    def _remove_signals(self) -> None:
        loop = self._loop
        if loop is None or not self.install_signal_handlers or threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
