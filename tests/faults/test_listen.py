"""db.listen.Listener (the bot's notifier and the play page listen through it) outlives a restart,
an outage and killed connections: it reconnects, runs its catch-up hook, and delivers again."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from db.listen import Listener
from testkit.waits import wait_for

pytestmark = pytest.mark.slow

CHANNEL = "animegamer_fault_test"


async def _notify_until_received(url: str, listener: Listener, n: int, timeout: float = 30) -> None:
    """NOTIFY (through a fresh connection, retried while the server is not back) until the
    listener hands over the payload."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            conn = await asyncpg.connect(url, timeout=3)
            try:
                await conn.execute(f"NOTIFY {CHANNEL}, '{{\"n\": {n}}}'")
            finally:
                await conn.close()
            got = await listener.next(timeout=1.5)
            if got.payload.get("n") == n:
                return
        except (TimeoutError, OSError, asyncpg.PostgresError):
            pass
        if loop.time() > deadline:
            raise AssertionError(f"notification {n} not received within {timeout} s")


def _failed_reconnects(caplog) -> int:
    return sum(r.getMessage().startswith("LISTEN reconnect failed") for r in caplog.records)


async def test_listener_outlives_restart_outage_and_kills(pg_cluster, fault_url, caplog):
    pg = pg_cluster
    connects = []

    async def on_connect() -> None:
        connects.append(1)

    async with Listener(fault_url, [CHANNEL], on_connect=on_connect, keepalive=1.0, max_reconnect_delay=2.0) as listener:
        await _notify_until_received(fault_url, listener, 1)

        await asyncio.to_thread(pg.restart)
        await _notify_until_received(fault_url, listener, 2)

        await asyncio.to_thread(pg.stop)
        reader = asyncio.create_task(listener.next(timeout=60))  # keeps iterating across the outage
        # Its own account of the outage: the drop noticed, then reconnects failing, twice.
        await wait_for(lambda: _failed_reconnects(caplog) >= 2, timeout=30, what="two failed reconnects")
        assert not listener.connected.is_set() and not reader.done()
        await asyncio.to_thread(pg.start)
        await asyncio.wait_for(listener.connected.wait(), 30)
        reader.cancel()
        await _notify_until_received(fault_url, listener, 3)

        await asyncio.to_thread(pg.terminate_connections)
        await _notify_until_received(fault_url, listener, 4)

    assert listener.reconnects >= 3 and len(connects) == listener.reconnects + 1
