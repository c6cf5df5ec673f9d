"""The worker's job manager (inference.job_manager.ResilientJobManager) repairs what a
database fault can leave on its side: a worker row a sweep removed, a fetch whose answer was lost."""

from __future__ import annotations

from sqlalchemy import text

from testkit.queue import new_session, submit, wait_until


async def _scalar(sessions, sql: str, **params):
    async with sessions() as s:
        return await s.scalar(text(sql), params)


async def test_a_removed_worker_row_comes_back_with_the_same_id(start_worker, sessions):
    w = await start_worker(films=["qiqi"])
    wid = w._turns.worker_id
    async with sessions() as s, s.begin():  # as a sweep does when it took this worker for dead
        await s.execute(text("DELETE FROM procrastinate_workers WHERE id = :w"), {"w": wid})
    await wait_until(lambda: _scalar(sessions, "SELECT count(*) = 1 FROM procrastinate_workers WHERE id = :w", w=wid), timeout=15)
    # ... and it still takes turns.
    gs = await new_session(sessions, 560)
    t = await submit(sessions, gs, "walk")
    await wait_until(lambda: _scalar(sessions, "SELECT status = 'done' FROM turns WHERE id = :t", t=t.id), timeout=30)


async def test_a_job_marked_ours_but_never_received_is_handed_back(start_worker, sessions):
    w = await start_worker(films=["qiqi"])
    gs = await new_session(sessions, 561, film="ponyo", character="ponyo")  # a queue this worker does not serve
    t = await submit(sessions, gs, "walk", character="ponyo")
    async with sessions() as s, s.begin():  # fetch_job committed, its answer lost with the connection
        await s.execute(text("UPDATE procrastinate_jobs SET status = 'doing', worker_id = :w WHERE id = :j"),
                        {"w": w._turns.worker_id, "j": t.job_id})
    await wait_until(lambda: _scalar(sessions, "SELECT status = 'todo' FROM procrastinate_jobs WHERE id = :j", j=t.job_id), timeout=15)
