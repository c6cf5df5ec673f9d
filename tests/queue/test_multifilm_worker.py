"""One model worker serving two films from the queue (`animegamer worker --film qiqi,ponyo`):
`make_backend` builds the multi-film backend from the files in the released layouts (one
Mistral, one agent checkpoint and one converted decoder per film), and turns of a qiqi session
and a ponyo session, queued together, come out with their film's model."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from sqlalchemy import select

from db.models import Turn
from inference.backends import make_backend
from inference.backends.multifilm import MultiFilmBackend
from inference.worker import Worker
from testkit.queue import new_session, submit, wait_until


@pytest.fixture(scope="module")
def models_root(tmp_path_factory):
    from testkit.tiny.models_dir import build_models_dir

    return build_models_dir(tmp_path_factory.mktemp("models"), {"qiqi": (10, 0), "ponyo": (11, 1)})


@pytest.fixture
def msettings(qsettings, models_root):
    return qsettings.model_copy(update={"backend": "animegamer", "models_dir": models_root, "device": "cpu",
                                        "dtype": "float32", "decoder_steps": 2, "history_window": 2,
                                        "decoder_gpu_budget_gb": 1e-6})  # room for no decoder: every turn moves one


def test_make_backend_picks_the_multi_film_backend(msettings):
    assert isinstance(make_backend(msettings, "animegamer", films=["qiqi", "ponyo"]), MultiFilmBackend)
    assert not isinstance(make_backend(msettings, "animegamer", films=["qiqi"]), MultiFilmBackend)


@pytest_asyncio.fixture
async def two_film_worker(msettings, sessions):
    w = Worker(msettings, backend="animegamer", films=["qiqi", "ponyo"], install_signal_handlers=False, migrate=False,
               metrics_port=0, progress_interval=0.1, concurrency=2)
    task = asyncio.create_task(w.run())
    ready = asyncio.create_task(w.ready.wait())
    await asyncio.wait([ready, task], return_when=asyncio.FIRST_COMPLETED, timeout=180)
    ready.cancel()
    if task.done():
        task.result()
    yield w
    w.stop()
    await asyncio.wait_for(task, 60)


async def test_one_worker_serves_both_films(sessions, two_film_worker):
    qiqi = await new_session(sessions, 401, "qiqi", character="qiqi")
    ponyo = await new_session(sessions, 402, "ponyo", character="ponyo")
    turns = [await submit(sessions, qiqi, "fly on broomstick"), await submit(sessions, ponyo, "swim", character="ponyo", background="sea"),
             await submit(sessions, qiqi, "run"), await submit(sessions, ponyo, "jump", character="ponyo", background="sea")]

    async def done():
        async with sessions() as s:
            rows = (await s.scalars(select(Turn).where(Turn.id.in_([t.id for t in turns])).order_by(Turn.id))).all()
        return rows if all(t.status in ("done", "failed") for t in rows) else None

    rows = await wait_until(done, timeout=300)
    assert [t.status for t in rows] == ["done"] * 4, [t.error for t in rows]
    for t in rows:
        assert t.backend == "animegamer" and {"mllm", "decode", "decoder_move", "mllm_adapter_switch"} <= set(t.timings)
    # No decoder fits the budget: the films' decoders took turns on the device, each brought there
    # for its clips, one at a time (the one in use stays until another film needs the room).
    backend = two_film_worker.backend
    snap = backend.residency.snapshot()
    assert backend.films == ("qiqi", "ponyo") and all(n >= 1 for n in snap.moves.values()) and len(snap.resident) == 1
