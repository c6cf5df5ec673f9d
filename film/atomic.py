"""Files written whole or not at all: a temporary name in the same folder, then a rename. A run
killed at any moment (Ctrl-C, kill -9) leaves either the old file or the new one, never half."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def replacing(path: Path, fsync: bool = False) -> Iterator[Path]:
    """A temporary path to write; renamed to `path` when the block ends without an error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        if fsync:
            with tmp.open("rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: Path, data: bytes, fsync: bool = False) -> None:
    with replacing(path, fsync) as tmp:
        tmp.write_bytes(data)


def write_json(path: Path, data: Any) -> None:
    """A stage's unit of work: fsynced, so a finished unit survives a power cut too."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n"
    write_bytes(path, text.encode("utf-8"), fsync=True)


def read_json(path: Path) -> Any | None:
    """A unit written by write_json, or None when it is not there."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
