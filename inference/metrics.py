"""The worker's Prometheus endpoint (aiohttp): /metrics and /healthz.

Each worker owns a registry (not the process-global one), so several workers can live in one
process (the play page, tests) without clashing.

Besides the turns' counts and times, a worker exports:

- animegamer_stage_seconds{film,stage}: seconds of each stage of a turn, from the turn's timings
  (`observe_stages`). stage: mllm (the MLLM's prediction), denoise and vae (the decoder's two
  parts), encode (the MP4); the preview backend's frame drawing is `render`. Other timing keys
  (queue_wait, total, batch sizes, adapter switches...) are not stages and are left out.
- animegamer_gpu_memory_allocated_bytes{device} / animegamer_gpu_memory_reserved_bytes{device}:
  torch's CUDA caching allocator, per device, as of the last `record_gpu_memory` (after each turn).
- animegamer_turn_gpu_peak_bytes{device}: a gauge, the peak allocated memory on the device during
  the last finished turn (`turn_gpu_started` resets torch's peak, `record_gpu_memory(turn=True)`
  reads it). A gauge rather than a histogram: what an operator needs is the headroom left on the
  card, read as max_over_time() of this gauge; with --concurrency above 1 the turns' windows
  overlap and the peak is the device's over the last turn's window, which is what can run out.
- animegamer_decoder_preset_info{preset}: 1 for the decoder speed preset in use (exact, fast or
  fastest); absent on a worker without a decoder (preview, mllm_only).

GPU memory is read only where this process has initialised CUDA through torch (a worker on the
CPU, the preview backend and the bot never import torch for it): elsewhere it is a no-op.

The worker (inference/worker.py) sets the preset when it builds its backend (`decoder_preset`),
reads the GPU's memory once the models are loaded, opens each turn's peak window as the turn
starts and reads it when the turn ends (done, failed or released), and observes a done turn's
stages from its timings.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

log = logging.getLogger(__name__)

# Turns take from well under a second (preview) to minutes (the model on a small GPU).
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 90, 120, 180, 300, 600)
# A stage takes from milliseconds (encoding a preview) to minutes (denoising on a small GPU).
_STAGE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)

# A turn's timing keys (TurnResult.timings) -> the `stage` label (a fixed set of values).
STAGE_TIMINGS = {
    "mllm": "mllm",  # inference.backends.animegamer.play_turn
    "decode_denoise": "denoise",  # inference.decoder.pipeline, through clip_batch's decode_ prefix
    "decode_vae": "vae",
    "encode": "encode",
    "render": "render",  # the preview backend
}
DECODER_PRESETS = ("exact", "fast", "fastest")  # settings.decoder_speed


def decoder_preset(backend: Any, speed: str) -> str | None:
    """The decoder speed preset (settings.decoder_speed) a backend runs with; None where it has no
    decoder: the preview, another backend, or the model's MLLM alone (mllm_only, benchmarks)."""
    if getattr(backend, "name", None) != "animegamer" or getattr(getattr(backend, "settings", None), "mllm_only", True):
        return None
    return speed


class Slots:
    """Slot numbers for the per-slot progress gauge (at most `concurrency` turns at once)."""

    def __init__(self, n: int) -> None:
        self.free = list(range(n))

    def take(self) -> int:
        return self.free.pop(0) if self.free else -1

    def give(self, slot: int) -> None:
        if slot >= 0:
            self.free.append(slot)
            self.free.sort()


def _loaded_cuda() -> Any | None:
    """torch.cuda if this process imported torch and initialised CUDA, else None (no import here:
    a process that never imported torch has nothing on a GPU)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_available() or not cuda.is_initialized():
        return None
    return cuda


class WorkerMetrics:
    def __init__(self, backend: str) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter("animegamer_turns", "Turns finished by this worker", ["status", "film"], registry=r)
        self.turn_seconds = Histogram(
            "animegamer_turn_seconds", "Time from a worker taking a turn to its result", ["film"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.queue_wait = Histogram(
            "animegamer_turn_queue_wait_seconds", "Time from submission to a worker taking the turn", ["film"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.running = Gauge("animegamer_turns_running", "Turns being generated now", registry=r)
        self.progress = Gauge("animegamer_turn_progress", "Progress (0..1) of the turn in each slot", ["slot"], registry=r)
        self.database_up = Gauge("animegamer_database_up", "1 while this worker reaches its database, 0 while cut off", registry=r)
        self.database_up.set(1)
        self.info = Gauge("animegamer_worker_info", "Worker build", ["backend"], registry=r)
        self.info.labels(backend=backend).set(1)
        self.stage_seconds = Histogram(
            "animegamer_stage_seconds", "Seconds of each stage of a turn (mllm, denoise, vae, encode, render)",
            ["film", "stage"], buckets=_STAGE_BUCKETS, registry=r,
        )
        self.gpu_allocated = Gauge(
            "animegamer_gpu_memory_allocated_bytes", "GPU memory held by tensors, per device", ["device"], registry=r,
        )
        self.gpu_reserved = Gauge(
            "animegamer_gpu_memory_reserved_bytes", "GPU memory reserved by torch's caching allocator, per device",
            ["device"], registry=r,
        )
        self.turn_gpu_peak = Gauge(
            "animegamer_turn_gpu_peak_bytes", "Peak GPU memory allocated during the last finished turn, per device",
            ["device"], registry=r,
        )
        self.decoder_preset = Gauge(
            "animegamer_decoder_preset_info", "The decoder speed preset in use (exact, fast, fastest)", ["preset"], registry=r,
        )

    def observe_stages(self, film: str, timings: Mapping[str, float]) -> None:
        """Record a finished turn's stage timings (TurnResult.timings); other keys are ignored."""
        for key, stage in STAGE_TIMINGS.items():
            seconds = timings.get(key)
            if isinstance(seconds, int | float) and seconds >= 0:
                self.stage_seconds.labels(film=film, stage=stage).observe(float(seconds))

    def set_decoder_preset(self, preset: str | None) -> None:
        """The decoder speed preset in use; None: no decoder (the series is removed)."""
        self.decoder_preset.clear()
        if preset is None:
            return
        if preset not in DECODER_PRESETS:
            raise ValueError(f"unknown decoder preset {preset!r}; one of {DECODER_PRESETS}")
        self.decoder_preset.labels(preset=preset).set(1)

    def turn_gpu_started(self, cuda: Any | None = None) -> None:
        """Start a turn's peak window: reset torch's peak statistics on every device."""
        cuda = cuda if cuda is not None else _loaded_cuda()
        if cuda is None:
            return
        for i in range(cuda.device_count()):
            cuda.reset_peak_memory_stats(i)

    def record_gpu_memory(self, cuda: Any | None = None, *, turn: bool = False) -> None:
        """Read allocated and reserved memory of every device (and, with turn=True, the peak since
        turn_gpu_started) from torch.cuda; a no-op where CUDA is not in use. `cuda`: torch.cuda or
        a stand-in with the same functions (tests)."""
        cuda = cuda if cuda is not None else _loaded_cuda()
        if cuda is None:
            return
        for i in range(cuda.device_count()):
            device = f"cuda:{i}"
            self.gpu_allocated.labels(device=device).set(cuda.memory_allocated(i))
            self.gpu_reserved.labels(device=device).set(cuda.memory_reserved(i))
            if turn:
                self.turn_gpu_peak.labels(device=device).set(cuda.max_memory_allocated(i))


async def start_server(
    metrics: WorkerMetrics, host: str, port: int, health: Callable[[], dict]
) -> tuple[web.AppRunner, int]:
    """Serve /metrics and /healthz; returns the runner (to clean up) and the bound port
    (port 0 picks a free one). /healthz answers 200 while health()["ok"], else 503."""

    async def metrics_view(request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health_view(request: web.Request) -> web.Response:
        state = health()
        return web.json_response(state, status=200 if state.get("ok") else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/healthz", health_view)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port  # public API (tests/play/test_adapters.py)
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return runner, bound
