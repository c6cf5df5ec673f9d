"""Micro-batching: turns of different sessions generated at the same time share one MLLM pass.

A worker with `--concurrency N` runs up to N turns in threads. Each thread hands its request to
the batcher and blocks; one batching thread takes the first waiting request, gathers the others
that arrive within `window` seconds (up to `max_batch`), runs them as one padded batch and hands
each thread its own result. With one turn at a time it adds at most `window` to a turn, which is
small against the seconds the decoder takes.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

_STOP = object()  # queued by close(): the batching thread ends after the batches before it

Req = TypeVar("Req")
Res = TypeVar("Res")


class MicroBatcher(Generic[Req, Res]):
    def __init__(self, run_batch: Callable[[Sequence[Req]], Sequence[Res]], max_batch: int = 4, window: float = 0.02):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._run = run_batch
        self.max_batch = max_batch
        self.window = window
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.batch_sizes: list[int] = []  # observed, for tests and metrics

    def submit(self, request: Req) -> Res:
        """Run `request` (in a batch with whatever else is waiting); blocks until its result."""
        self._ensure_thread()
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((request, fut))
        return fut.result()

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="mllm-batcher", daemon=True)
                self._thread.start()

    def close(self, timeout: float = 60.0) -> None:
        """Stop the batching thread (it holds the model through `run_batch` until then)."""
        with self._start_lock:
            if self._thread is not None:
                self._queue.put(_STOP)
                self._thread.join(timeout)
                self._thread = None

    def _gather(self) -> list[tuple[Req, concurrent.futures.Future]] | None:
        first = self._queue.get()
        if first is _STOP:
            return None
        batch = [first]
        deadline = time.monotonic() + self.window
        while len(batch) < self.max_batch:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                item = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if item is _STOP:
                self._queue.put(_STOP)  # after this batch
                break
            batch.append(item)
        return batch

    def _loop(self) -> None:
        while True:
            batch = self._gather()
            if batch is None:
                return
            self.batch_sizes.append(len(batch))
            try:
                results = self._run([req for req, _ in batch])
                if len(results) != len(batch):  # a turn left without a result would wait forever
                    raise RuntimeError(f"the batch function gave {len(results)} results for {len(batch)} requests")
            except BaseException as e:  # every waiting turn gets the error
                for _, fut in batch:
                    fut.set_exception(e)
                continue
            for (_, fut), res in zip(batch, results, strict=True):
                fut.set_result(res)


def close_all(*batchers: MicroBatcher | None) -> None:
    """Stop these batchers' threads (None: none was started)."""
    for batcher in batchers:
        if batcher is not None:
            batcher.close()
