"""Running the real `animegamer play` command as a subprocess, and looking at what it serves."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testkit.pg import fresh_database
from testkit.waits import wait_for_sync
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
READY = re.compile(r"AnimeGamer play page: (http://\S+)")


class _Exited(AssertionError):
    """The process ended without printing the line awaited."""


class PlayProcess:
    """`animegamer play` in its own process group (as a terminal would run it); its output is
    collected so a test can wait for lines and show them when something fails."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.port = free_port()
        self.lines: list[str] = []
        self.started = time.monotonic()
        self.ready_after: float | None = None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "animegamer.cli", "play", "--port", str(self.port), *args],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match:
        rx = re.compile(pattern)
        exited = False

        def found() -> re.Match | None:
            nonlocal exited
            m = next((m for line in list(self.lines) if (m := rx.search(line))), None)
            if m is None and exited:  # its last lines were read: it ended without printing one
                raise _Exited(f"play exited ({self.proc.returncode}) before {pattern!r}:\n{self.output}")
            exited = self.proc.poll() is not None and not self._reader.is_alive()
            return m

        try:
            return wait_for_sync(found, timeout, what=repr(pattern))
        except _Exited:
            raise
        except AssertionError:
            raise AssertionError(f"no {pattern!r} within {timeout} s:\n{self.output}") from None

    def wait_ready(self, timeout: float = 120) -> str:
        m = self.wait_for(READY.pattern, timeout)
        self.ready_after = time.monotonic() - self.started
        return m.group(1)

    def interrupt(self, timeout: float = 60) -> int:
        """Ctrl-C: SIGINT to the whole process group, as a terminal sends it."""
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        finally:
            self._reader.join(5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def play_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANIMEGAMER_") and k != "DATABASE_URL"}
    env.update(
        PYTHONPATH=str(ROOT),
        ANIMEGAMER_DATA_DIR=str(data_dir),
        ANIMEGAMER_COOLDOWN_SECONDS="0",
        ANIMEGAMER_QUEUE_POLL_INTERVAL="0.2",
        ANIMEGAMER_METRICS_PORT="0",
        **extra,
    )
    return env


@contextmanager
def running_play(data_dir: Path, database: str, *args: str, **env: str) -> Iterator[tuple[PlayProcess, str]]:
    """`animegamer play` on a fresh database, ready; on leaving it must stop cleanly (exit 0)."""
    with fresh_database(database) as url:
        proc = PlayProcess(play_env(data_dir, DATABASE_URL=url, **env), *args)
        try:
            proc.wait_ready()
            yield proc, url
            assert proc.interrupt() == 0, proc.output
        finally:
            proc.kill()


def ffprobe(path: Path) -> dict:
    """The first video stream, with its frames counted by decoding them all."""
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
         "stream=codec_name,width,height,nb_read_frames,pix_fmt,avg_frame_rate", "-of", "json", str(path)],
        capture_output=True, text=True, check=True, timeout=60,
    )
    return json.loads(out.stdout)["streams"][0]


def save_artifact(name: str, data: bytes) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.write_bytes(data)
    return path
