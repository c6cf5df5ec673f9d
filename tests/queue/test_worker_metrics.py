"""The worker's metrics added for the dashboard (inference.metrics): stage seconds from a turn's
timings, the decoder preset, and GPU memory from torch.cuda, with a stand-in for torch.cuda (the
real one is read only where CUDA is initialised; elsewhere recording is a no-op); and a preview
worker recording them as it runs a turn (stages, GPU memory through the stand-in, no preset)."""

from __future__ import annotations

import sys
import types

import pytest

from inference.metrics import WorkerMetrics, decoder_preset


class FakeCuda:
    """What WorkerMetrics reads of torch.cuda, for two devices."""

    def __init__(self) -> None:
        self.allocated = [100, 200]
        self.reserved = [1000, 2000]
        self.peak = [150, 250]
        self.resets: list[int] = []

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def device_count(self) -> int:
        return 2

    def memory_allocated(self, i: int) -> int:
        return self.allocated[i]

    def memory_reserved(self, i: int) -> int:
        return self.reserved[i]

    def max_memory_allocated(self, i: int) -> int:
        return self.peak[i]

    def reset_peak_memory_stats(self, i: int) -> None:
        self.resets.append(i)
        self.peak[i] = self.allocated[i]


def _value(m: WorkerMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_stage_seconds_come_from_the_turns_timings():
    m = WorkerMetrics("animegamer")
    m.observe_stages("qiqi", {
        "mllm": 1.5, "mllm_generate": 1.2, "decode": 9.0, "decode_denoise": 8.0, "decode_vae": 0.9,
        "decode_batch": 2.0, "encode": 0.2, "queue_wait": 30.0, "total": 11.0,
    })
    m.observe_stages("ponyo", {"rules": 0.001, "render": 0.5, "encode": 0.1, "generate": 0.6})  # the preview's
    for film, stage, seconds in [("qiqi", "mllm", 1.5), ("qiqi", "denoise", 8.0), ("qiqi", "vae", 0.9),
                                 ("qiqi", "encode", 0.2), ("ponyo", "render", 0.5), ("ponyo", "encode", 0.1)]:
        assert _value(m, "animegamer_stage_seconds_count", film=film, stage=stage) == 1
        assert _value(m, "animegamer_stage_seconds_sum", film=film, stage=stage) == pytest.approx(seconds)
    stages = {s.labels["stage"] for f in m.registry.collect() if f.name == "animegamer_stage_seconds" for s in f.samples}
    assert stages == {"mllm", "denoise", "vae", "encode", "render"}  # queue_wait, total, batch...: not stages


def test_decoder_preset_is_one_series():
    m = WorkerMetrics("animegamer")
    m.set_decoder_preset("fast")
    assert _value(m, "animegamer_decoder_preset_info", preset="fast") == 1
    m.set_decoder_preset("exact")  # replaced, not added
    assert _value(m, "animegamer_decoder_preset_info", preset="fast") is None
    assert _value(m, "animegamer_decoder_preset_info", preset="exact") == 1
    m.set_decoder_preset(None)  # no decoder
    assert _value(m, "animegamer_decoder_preset_info", preset="exact") is None
    with pytest.raises(ValueError, match="unknown decoder preset"):
        m.set_decoder_preset("turbo")


def test_gpu_memory_per_device_and_the_last_turns_peak():
    m = WorkerMetrics("animegamer")
    cuda = FakeCuda()
    m.record_gpu_memory(cuda)
    assert _value(m, "animegamer_gpu_memory_allocated_bytes", device="cuda:0") == 100
    assert _value(m, "animegamer_gpu_memory_reserved_bytes", device="cuda:1") == 2000
    assert _value(m, "animegamer_turn_gpu_peak_bytes", device="cuda:0") is None  # no turn yet

    m.turn_gpu_started(cuda)
    assert cuda.resets == [0, 1]
    cuda.peak = [5000, 250]  # the turn's activations on device 0
    cuda.allocated = [120, 200]
    m.record_gpu_memory(cuda, turn=True)
    assert _value(m, "animegamer_turn_gpu_peak_bytes", device="cuda:0") == 5000
    assert _value(m, "animegamer_turn_gpu_peak_bytes", device="cuda:1") == 250
    assert _value(m, "animegamer_gpu_memory_allocated_bytes", device="cuda:0") == 120


def test_gpu_memory_is_a_no_op_without_cuda(monkeypatch):
    m = WorkerMetrics("preview")
    # No torch imported in this process (the preview worker, the bot): nothing read, nothing imported.
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    m.turn_gpu_started()
    m.record_gpu_memory(turn=True)
    assert "torch" not in sys.modules
    # torch imported, but CUDA not initialised (a worker on the CPU): still nothing, and no CUDA
    # context is created by asking.
    cuda = FakeCuda()
    cuda.is_initialized = lambda: False  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    m.turn_gpu_started()
    m.record_gpu_memory(turn=True)
    assert cuda.resets == []
    names = {s.name for f in m.registry.collect() for s in f.samples}
    assert not any(n.startswith(("animegamer_gpu_", "animegamer_turn_gpu_")) for n in names)
    # Initialised: read through torch.cuda itself.
    cuda.is_initialized = lambda: True  # type: ignore[method-assign]
    m.record_gpu_memory()
    assert _value(m, "animegamer_gpu_memory_reserved_bytes", device="cuda:0") == 1000


# --- a running worker: its preset and GPU memory after loading (inference/worker.py), each turn's
# stages and GPU peak (inference/turn_runner.py)


def test_the_decoder_preset_of_a_backend():
    def model(mllm_only: bool):
        return types.SimpleNamespace(name="animegamer", settings=types.SimpleNamespace(mllm_only=mllm_only))

    assert decoder_preset(model(False), "fast") == "fast"
    assert decoder_preset(model(True), "fast") is None  # the MLLM alone: no decoder
    assert decoder_preset(types.SimpleNamespace(name="preview", is_preview=True), "exact") is None
    assert decoder_preset(types.SimpleNamespace(name="animegamer"), "exact") is None  # unknown: no claim


async def test_a_worker_records_stages_gpu_memory_and_its_preset(sessions, start_worker, monkeypatch):
    import aiohttp
    from prometheus_client.parser import text_string_to_metric_families

    from testkit.queue import all_finished, new_session, submit, wait_until

    # A process whose torch has initialised CUDA (the stand-in): the worker reads it after loading
    # its backend and around each turn.
    cuda = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    w = await start_worker(metrics_port=-1, films=["qiqi"])
    assert w.metrics is not None
    assert _value(w.metrics, "animegamer_gpu_memory_allocated_bytes", device="cuda:0") == 100  # read after loading
    assert _value(w.metrics, "animegamer_turn_gpu_peak_bytes", device="cuda:0") is None
    gs = await new_session(sessions, 160)
    await submit(sessions, gs, "walk")
    await wait_until(lambda: all_finished(sessions, 1))
    assert cuda.resets == [0, 1]  # the turn's peak window opened on each device
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{w.bound_metrics_port}/metrics") as r:
        samples = {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(await r.text()) for s in f.samples}

    def sample(name: str, **labels: str) -> float | None:
        return samples.get((name, frozenset(labels.items())))

    # The preview's stages: drawing the frames and encoding the MP4, one sample each.
    assert sample("animegamer_stage_seconds_count", film="qiqi", stage="render") == 1
    assert sample("animegamer_stage_seconds_count", film="qiqi", stage="encode") == 1
    assert sample("animegamer_stage_seconds_count", film="qiqi", stage="mllm") is None
    assert sample("animegamer_turn_gpu_peak_bytes", device="cuda:0") == 100  # read when the turn ended
    assert sample("animegamer_turn_gpu_peak_bytes", device="cuda:1") == 200
    assert sample("animegamer_gpu_memory_reserved_bytes", device="cuda:1") == 2000
    # The preview has no decoder: no preset series.
    assert not [k for k in samples if k[0] == "animegamer_decoder_preset_info"]
