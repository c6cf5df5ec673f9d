"""The game service as the play page runs it: the real Postgres of the test (`sessions`) and the
real procrastinate queue (QueueJobs). A module that needs other jobs overrides `deps`."""

from __future__ import annotations

import pytest

from service.deps import Deps
from service.jobs import QueueJobs


@pytest.fixture
def deps(sessions, settings) -> Deps:
    return Deps(settings, sessions, QueueJobs())
