"""play.page.every: the page's background tasks (clip pruning, the vote deadline check) run at
once and then on their interval for the app's lifetime; a failing round is logged and the next
one runs; the task ends with the app."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from play.page import every
from testkit.waits import wait_for


async def test_a_background_job_runs_again_after_a_failure_and_stops_with_the_app(caplog):
    runs: list[int] = []

    async def job(app: web.Application) -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise ConnectionError("database went away")

    app = web.Application()
    app.cleanup_ctx.append(every(0.01, job, "the test job failed"))
    runner = web.AppRunner(app)
    with caplog.at_level(logging.WARNING, logger="play.page"):
        await runner.setup()
        await wait_for(lambda: len(runs) >= 3, timeout=5, interval=0.01, what="three rounds")
        await runner.cleanup()
    assert [r.getMessage() for r in caplog.records] == ["the test job failed: database went away"]
    # The task ended with the app (its cleanup awaited it): no round can follow.
    assert not [t for t in asyncio.all_tasks() if "every.<locals>.run.<locals>.loop" in t.get_coro().__qualname__]
