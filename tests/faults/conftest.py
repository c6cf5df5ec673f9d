"""Fault-test fixtures: a private Postgres cluster (tests/pgcluster.py) that the tests may restart,
stop and have its connections killed, a migrated database on it, and real processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import pytest_asyncio

from db.engine import make_engine, make_sessionmaker
from testkit.pg import migrate_to_head
from testkit.queue import ROOT, worker_env
from tests.bot.conftest import bot_db, start_bot, world  # noqa: F401  (the real bot against the fake Discord)
from tests.pgcluster import PgCluster
from tests.queue.conftest import qsettings, start_worker  # noqa: F401


@pytest.fixture(scope="session")
def pg_cluster():
    with PgCluster() as pg:
        yield pg


@pytest.fixture
def fault_url(pg_cluster) -> str:
    """A fresh migrated database on the private cluster (the cluster is up when the test starts)."""
    if not pg_cluster.running():
        pg_cluster.start()
    return migrate_to_head(pg_cluster.create_database())


@pytest_asyncio.fixture
async def fault_sessions(fault_url):
    engine = make_engine(fault_url)
    yield make_sessionmaker(engine)
    await engine.dispose()


class PageProcess:
    """`animegamer play --no-worker` as a subprocess; `url` once it serves."""

    def __init__(self, database_url: str, log_path: Path) -> None:
        env = worker_env(database_url, cooldown_seconds=0, backlog_cap=50)
        env["DATABASE_URL"] = database_url
        self.log_path = log_path
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "animegamer.cli", "play", "--no-worker", "--host", "127.0.0.1", "--port", "0"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        self.url: str | None = None
        self._ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        with open(self.log_path, "wb") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                m = re.search(rb"play page: (http://\S+)", line)
                if m:
                    self.url = m.group(1).decode()
                    self._ready.set()

    async def wait_ready(self, timeout: float = 60) -> str:
        if not await asyncio.to_thread(self._ready.wait, timeout):
            raise AssertionError(f"the play page did not start; see {self.log_path}")
        return self.url

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def page_process(tmp_path):
    started: list[PageProcess] = []

    def start(database_url: str) -> PageProcess:
        p = PageProcess(database_url, tmp_path / f"page{len(started)}.log")
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


@pytest.fixture(autouse=True)
def copy_logs(tmp_path, request):
    """ANIMEGAMER_FAULT_LOGS=DIR keeps every process log of the fault tests (to read them after)."""
    yield
    target = os.environ.get("ANIMEGAMER_FAULT_LOGS")
    if target:
        out = Path(target) / request.node.name
        out.mkdir(parents=True, exist_ok=True)
        for f in tmp_path.glob("*.log"):
            shutil.copy(f, out / f.name)


def keep_logs(tmp_path: Path) -> None:
    """Print the processes' logs (a failing fault test is read from them)."""
    for f in sorted(tmp_path.glob("*.log")):
        print(f"===== {f.name}\n{f.read_text(errors='replace')[-6000:]}", file=sys.stderr)


