"""Reading an operator's TOML file (films, content rules): one set of messages for what can go wrong."""

from __future__ import annotations

import tomllib
from pathlib import Path


def read_toml(path: Path, what: str, error: type[Exception]) -> dict:
    """The file's table; `error([message])` for a missing, unreadable or invalid file, naming it
    and `what` it is (e.g. "films file")."""
    source = str(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error([f"{source}: the {what} does not exist"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise error([f"{source}: cannot read the {what} ({e})"]) from None
    except tomllib.TOMLDecodeError as e:
        raise error([f"{source}: not valid TOML ({e})"]) from None
