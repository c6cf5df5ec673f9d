"""`animegamer healthcheck worker|bot` (the compose healthchecks' probe) against the worker's real
/healthz server: exit 0 on 200, 1 on 503 or no answer, with the reason printed."""

from __future__ import annotations

import asyncio

from animegamer.cli import main
from inference.metrics import WorkerMetrics, start_server
from tests.ports import free_port


async def _probe(monkeypatch, part: str, port: int, capsys) -> tuple[int, str]:
    env = "ANIMEGAMER_METRICS_PORT" if part == "worker" else "ANIMEGAMER_BOT_HEALTH_PORT"
    monkeypatch.setenv(env, str(port))
    monkeypatch.setenv("ANIMEGAMER_METRICS_HOST", "0.0.0.0")  # as in compose: probed over loopback
    code = await asyncio.to_thread(main, ["healthcheck", part, "--timeout", "3"])
    out = capsys.readouterr()
    return code, out.out + out.err


async def test_probe_follows_the_health_answer(monkeypatch, capsys):
    state = {"ok": False, "database": "unreachable"}
    runner, port = await start_server(WorkerMetrics("preview"), "127.0.0.1", 0, lambda: dict(state))
    try:
        code, text = await _probe(monkeypatch, "worker", port, capsys)
        assert code == 1 and "503" in text and "unreachable" in text
        state.update(ok=True, database="up")
        code, text = await _probe(monkeypatch, "worker", port, capsys)
        assert code == 0 and "200" in text
    finally:
        await runner.cleanup()


async def test_probe_without_an_answer_or_with_the_endpoint_off(monkeypatch, capsys):
    code, text = await _probe(monkeypatch, "bot", free_port(), capsys)
    assert code == 1 and "no answer" in text
    code, text = await _probe(monkeypatch, "bot", 0, capsys)
    assert code == 1 and "ANIMEGAMER_BOT_HEALTH_PORT=0" in text
