"""Which refusal an exception stands for: the database only when it is the database."""

from __future__ import annotations

import socket

import pytest
from discord import app_commands

from bot.answers.replies import as_game_error
from game.errors import ServiceDown


@pytest.mark.parametrize("exc", [
    ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
    ConnectionResetError(104, "Connection reset by peer"),
    socket.gaierror(-2, "Name or service not known"),
    TimeoutError(),
])
def test_network_failures_read_as_the_database_down(exc):
    assert isinstance(as_game_error(exc), ServiceDown)
    wrapped = RuntimeError("while connecting")
    wrapped.__cause__ = exc
    assert isinstance(as_game_error(wrapped), ServiceDown)


@pytest.mark.parametrize("exc", [
    FileNotFoundError(2, "No such file or directory", "ffprobe"),
    PermissionError(13, "Permission denied", "/data/clip.mp4"),
    IsADirectoryError(21, "Is a directory", "/models"),
    OSError(28, "No space left on device"),
    BrokenPipeError(32, "Broken pipe"),  # a subprocess that died, not a database connection
])
def test_files_and_programs_are_internal_errors(exc):
    assert as_game_error(exc) is None
    assert as_game_error(app_commands.CommandInvokeError(app_commands.Command(
        name="export", description="x", callback=_noop), exc)) is None


async def _noop(interaction) -> None:  # pragma: no cover
    pass
