"""The game service as the play page runs it: the real Postgres of the test (`sessions`) and the
real procrastinate queue (QueueJobs). A module that needs other jobs overrides `deps`. And
`rounds_due`: the open vote rounds' deadlines passed, as time passing would."""

from __future__ import annotations

import pytest
from sqlalchemy import func, text, update

from db.models import VoteRound
from service.deps import Deps
from service.jobs import QueueJobs


@pytest.fixture
def deps(sessions, settings) -> Deps:
    return Deps(settings, sessions, QueueJobs())


@pytest.fixture
def rounds_due(sessions):
    """Move the open vote rounds' deadlines a second into the past."""

    async def due() -> None:
        async with sessions.begin() as s:
            await s.execute(update(VoteRound).where(VoteRound.status == "open")
                            .values(deadline=func.now() - text("interval '1 second'")))

    return due
