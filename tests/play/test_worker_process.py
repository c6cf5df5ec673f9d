"""The play command's worker supervision: which worker it starts, restarts and stops."""

from __future__ import annotations

import asyncio
import sys

from play.runner import PlayOptions, WorkerProcess
from testkit.waits import wait_for

OPTIONS = PlayOptions(host="127.0.0.1", port=0, worker_grace=1)


def test_preview_worker_serves_every_film_and_a_model_worker_one():
    preview = WorkerProcess("postgresql://x/y", "preview", OPTIONS, film="qiqi").command()
    assert "--film" not in preview and preview[preview.index("--backend") + 1] == "preview"
    model = WorkerProcess("postgresql://x/y", "animegamer", OPTIONS, film="ponyo").command()
    assert model[model.index("--film") + 1] == "ponyo" and "--no-migrate" in model


class Sleeper(WorkerProcess):
    """A stand-in process that records the film it was started for, then waits for SIGTERM."""

    def command(self) -> list[str]:
        script = "import sys, time; print(sys.argv[1], flush=True); time.sleep(60)"  # sleep: its whole life, until stopped
        return [sys.executable, "-c", script, str(self.film)]


async def test_model_worker_restarts_for_another_film_and_stops():
    w = Sleeper("postgresql://x/y", "animegamer", OPTIONS, film="qiqi")
    await w.start()
    await wait_for(lambda: w.proc is not None, timeout=10, interval=0.01, what="the process started")
    first = w.proc
    await w.set_film("qiqi")  # same film: nothing happens
    assert w.proc is first and first.returncode is None
    await w.set_film("ponyo")
    assert first.returncode is not None
    await wait_for(lambda: w.proc is not first, timeout=10, interval=0.01, what="a process for the new film")
    assert w.film == "ponyo" and w.proc.returncode is None
    await w.stop()
    assert w.proc.returncode is not None


async def test_a_worker_that_cannot_start_is_not_restarted():
    class Broken(WorkerProcess):
        def command(self):
            return [sys.executable, "-c", "raise SystemExit(2)"]

    w = Broken("postgresql://x/y", "preview", OPTIONS)
    await w.start()
    await asyncio.wait_for(w._task, 10)  # the supervisor gives up instead of looping
    assert w.proc.returncode == 2
    await w.stop()


async def test_a_second_ctrl_c_does_not_wait_for_the_worker(tmp_path):
    up, termed = tmp_path / "up", tmp_path / "term"

    class Stubborn(WorkerProcess):  # ignores SIGTERM, as a worker finishing a long turn does
        def command(self):
            # Its own signals: a file once its handler is installed, another when SIGTERM came.
            return [sys.executable, "-c",
                    "import pathlib, signal, sys, time; "
                    "signal.signal(signal.SIGTERM, lambda *_: pathlib.Path(sys.argv[2]).touch()); "
                    "pathlib.Path(sys.argv[1]).touch(); time.sleep(60)",  # sleep: a turn that takes long
                    str(up), str(termed)]

    w = Stubborn("postgresql://x/y", "preview", PlayOptions(host="127.0.0.1", port=0, worker_grace=30))
    await w.start()
    await wait_for(up.exists, timeout=30, interval=0.01, what="its SIGTERM handler installed")
    stopping = asyncio.create_task(w.stop())
    await wait_for(termed.exists, timeout=10, interval=0.01, what="SIGTERM received (and ignored)")
    assert w.proc.returncode is None and not stopping.done()  # it goes on: stop() waits for its turn
    w.hurry.set()
    await asyncio.wait_for(stopping, 5)
    assert w.proc.returncode == -9
