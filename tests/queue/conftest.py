"""Queue fixtures: settings tuned for fast tests, and in-process workers."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
import pytest_asyncio

from inference.worker import Worker
from settings import Settings
from testkit.queue import wait_started


@pytest.fixture
def qsettings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        database_url=database_url, data_dir=tmp_path / "data", cooldown_seconds=0,
        queue_poll_interval=0.2, stalled_after=5.0, metrics_port=0, history_window=2, _env_file=None,
    )


@pytest_asyncio.fixture
async def start_worker(qsettings, sessions):
    """Start in-process workers (preview backend, small frames unless told); stopped after the test."""
    started: list[tuple[Worker, asyncio.Task]] = []

    async def start(**kw) -> Worker:
        options = {"width": 96, "height": 64, **kw.pop("backend_options", {})}
        kw.setdefault("install_signal_handlers", False)
        kw.setdefault("migrate", False)
        kw.setdefault("progress_interval", 0.1)
        w = Worker(kw.pop("settings", qsettings), backend=kw.pop("backend", "preview"), backend_options=options, **kw)
        task = asyncio.create_task(w.run())
        started.append((w, task))
        await wait_started(w, task)
        w.task = task
        return w

    yield start

    for w, _ in started:
        w.stop()
    for _, t in started:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(t, 30)
