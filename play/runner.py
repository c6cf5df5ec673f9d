"""`animegamer play`: the whole game on one machine, from one command.

It opens the database (the embedded Postgres under the data directory unless DATABASE_URL is
set) and applies the migrations, starts one `animegamer worker` process (the configured
backend: the preview one unless a model is configured), and serves the play page.

Stopping (Ctrl-C or SIGTERM) undoes it in reverse: the page stops (open event streams end), the
worker gets SIGTERM and finishes or hands back its turn (its own graceful shutdown), the LISTEN
connection and the engine close, and the embedded Postgres is stopped with `pg_ctl stop`
(a clean shutdown: the next start needs no recovery). The session lives in the database, so
the next `animegamer play` resumes it.

The worker runs in its own process session, so the terminal's Ctrl-C reaches only this process,
which stops things in order rather than all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from localweb.guard import TOKEN_PARAM, needs_token, new_token
from play.app import make_runner
from play.events import EventHub
from play.page import PLAY_CHANNEL_ID, Page, ensure_film
from service import runtime
from settings import Settings

log = logging.getLogger("animegamer.play")

WORKER_RESTART_DELAYS = (1, 2, 5, 10, 30)  # seconds before restarting a worker that died
START_ERROR = 2  # `animegamer worker` exit status for a start error (no ffmpeg, no model...)


@dataclass
class PlayOptions:
    host: str
    port: int
    worker: bool = True  # False: turns wait for workers started elsewhere
    worker_args: list[str] = field(default_factory=list)  # extra `animegamer worker` arguments
    worker_grace: float = 10.0  # seconds the worker may finish its turn when stopping


class WorkerProcess:
    """One `animegamer worker` subprocess, restarted if it dies, stopped on request."""

    def __init__(self, url: str, backend: str, options: PlayOptions, film: str | None = None) -> None:
        self.url = url
        self.backend = backend
        self.options = options
        # The preview serves every film's queue; a model worker loads one film's checkpoints.
        self.film = None if backend == "preview" else film
        self.proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._restarting = False
        self.hurry = asyncio.Event()  # a second Ctrl-C: do not wait for the current turn

    def command(self) -> list[str]:
        films = ["--film", self.film] if self.film else []
        return [
            sys.executable, "-m", "animegamer.cli", "worker", "--backend", self.backend, *films,
            "--metrics-port", "0", "--no-migrate", "--grace", str(self.options.worker_grace),
            *self.options.worker_args,
        ]

    async def set_film(self, film: str) -> None:
        """A model worker follows the page's film: it is restarted for another film."""
        if self.film is None or film == self.film:
            return
        log.info("the film changed to %s: restarting the worker", film)
        self.film = film
        self._restarting = True
        await self._terminate()

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The same database as the page (for the embedded server: its socket URL).
        env["DATABASE_URL"] = env["ANIMEGAMER_DATABASE_URL"] = self.url
        # Make sure the child imports this very code, wherever it was started from.
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        return env

    async def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name="play-worker")

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(*self.command(), env=self.env(), start_new_session=True)

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping:
            started = time.monotonic()
            self.proc = await self._spawn()
            log.info("worker started (pid %d, backend %s)", self.proc.pid, self.backend)
            code = await self.proc.wait()
            if self._stopping:
                return
            if self._restarting:
                self._restarting = False
                continue
            if code == START_ERROR:  # bad configuration: restarting would only repeat the message
                log.error("the worker cannot start (see its message above); turns will wait until it is fixed")
                return
            failures = 0 if time.monotonic() - started > 60 else failures + 1
            delay = WORKER_RESTART_DELAYS[min(failures, len(WORKER_RESTART_DELAYS) - 1)]
            log.error("the worker exited (status %s); restarting it in %d s", code, delay)
            await asyncio.sleep(delay)

    async def stop(self) -> None:
        self._stopping = True
        await self._terminate()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _terminate(self) -> None:
        """SIGTERM: the worker stops taking turns and finishes (or hands back) its current one."""
        proc = self.proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            exited = asyncio.ensure_future(proc.wait())
            hurry = asyncio.ensure_future(self.hurry.wait())
            await asyncio.wait({exited, hurry}, timeout=self.options.worker_grace + 15, return_when=asyncio.FIRST_COMPLETED)
            hurry.cancel()
            if not exited.done():
                # Its running turn is recovered by the stalled-job sweep of the next worker.
                log.error("stopping the worker at once" if self.hurry.is_set() else "the worker did not stop in time; killing it")
                proc.kill()
            await exited


async def serve(settings: Settings, options: PlayOptions, *, stop: asyncio.Event, hurry: asyncio.Event | None = None) -> None:
    """Run everything until `stop` is set, then stop it all in reverse order. `hurry` (a second
    Ctrl-C) stops the worker without waiting for its turn."""
    t0 = time.monotonic()
    async with runtime.opened(settings, migrate=True) as store:
        hub = EventHub(store.url, PLAY_CHANNEL_ID, store)
        await hub.start()
        worker = None
        runner = None
        try:
            page = Page(settings=settings, store=store, hub=hub, backend=settings.backend, host=options.host)
            film = await ensure_film(page)
            if options.worker:
                worker = WorkerProcess(store.url, settings.backend, options, film)
                if hurry is not None:
                    worker.hurry = hurry
                page.on_film = worker.set_film
                await worker.start()
            token = new_token() if needs_token(options.host) else None  # beyond loopback (localweb.guard)
            runner = make_runner(page, shutdown_timeout=3, token=token)
            await runner.setup()
            site = web.TCPSite(runner, options.host, options.port)
            await site.start()
            port = runner.addresses[0][1] if runner.addresses else options.port  # --port 0: the one chosen
            host = f"[{options.host}]" if ":" in options.host else options.host
            url = f"http://{host}:{port}" + (f"/?{TOKEN_PARAM}={token}" if token else "")
            print(f"AnimeGamer play page: {url}  (ready in {time.monotonic() - t0:.1f} s; Ctrl-C stops)", flush=True)
            if token:
                print(f"Served beyond this machine: every request needs the token above (from another machine, "
                      f"put this machine's address in place of {options.host}).", flush=True)
            if settings.backend == "preview":
                print("Clips come from the preview backend (no model configured); they are labelled PREVIEW.", flush=True)
            await stop.wait()
            print("stopping…", flush=True)
        finally:
            if runner is not None:
                await runner.cleanup()
            if worker is not None:
                await worker.stop()
            await hub.stop()
    print("stopped.", flush=True)


def run(settings: Settings, options: PlayOptions) -> int:
    async def main() -> None:
        stop, hurry = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set():
                print("stopping now (the worker's turn will run again next time)…", flush=True)
                hurry.set()
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        await serve(settings, options, stop=stop, hurry=hurry)

    asyncio.run(main())
    return 0
