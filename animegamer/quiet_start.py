"""A quiet start: the known harmless warnings of third-party libraries, silenced by name.

On a CPU machine, importing peft or diffusers (the model code) makes transformers and diffusers
import torchao, whose import logs a wall of lines that say nothing about this program. Each entry
below names who prints it and why it is harmless here; anything not listed still shows. Installed
first thing by every `animegamer` command (animegamer.cli, before any subcommand module is
imported) and by the test run (tests/conftest.py).
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass


def _no_cuda() -> bool:
    torch = sys.modules.get("torch")  # the library that logs has imported it
    return torch is None or not torch.cuda.is_available()


def _always() -> bool:
    return True


@dataclass(frozen=True)
class LogNoise:
    logger: str
    fragment: str  # in the formatted message
    when: Callable[[], bool] = _always
    why: str = ""


LOG_NOISE = (
    LogNoise("torchao", "Failed to load ", _no_cuda,
             "torchao's CUDA-only kernels (_C_mxfp8, _C_cutlass_90a) cannot load without CUDA; nothing here uses them"),
    LogNoise("torch.utils._pytree", "is an Enum subclass and is now natively supported",
             why="torchao registers its enums with a PyTorch API PyTorch now deprecates for enums: torchao's to change"),
    LogNoise("discord.client", "is not installed, voice will NOT be supported",
             why="discord.py's voice needs PyNaCl and davey; the bot plays no audio"),
    LogNoise("diffusers.quantizers.torchao.torchao_quantizer", "Unable to import `torchao` Tensor objects",
             why="diffusers looks for classes newer torchao releases moved; only torchao-serialised checkpoints need them"),
)


@dataclass(frozen=True)
class WarningNoise:
    message: str  # a regular expression matched at the start of the warning's text
    category: type[Warning]
    module: str  # the module the warning is attributed to
    why: str = ""


WARNING_NOISE = (
    WarningNoise("'audioop' is deprecated", DeprecationWarning, "discord.player",
                 "discord.py's voice support imports audioop; the bot plays no audio"),
    WarningNoise("XDG_RUNTIME_DIR is not set", UserWarning, "platformdirs",
                 "a session without a login (root in CI, a service): platformdirs falls back to /tmp, as it says"),
    WarningNoise("`is_gradient_checkpointing` is deprecated", FutureWarning, "transformers.modeling_utils",
                 "peft asks every model for the old name when it wraps it"),
)


class _DropNoise(logging.Filter):
    def __init__(self, noise: list[LogNoise]) -> None:
        super().__init__()
        self.noise = noise

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(n.fragment in message and n.when() for n in self.noise)


_installed = False


def quiet_start() -> None:
    """Install the filters (once; a logger filter sees only records logged on that very logger,
    which is how each library above logs these)."""
    global _installed
    if _installed:
        return
    _installed = True
    by_logger: dict[str, list[LogNoise]] = {}
    for n in LOG_NOISE:
        by_logger.setdefault(n.logger, []).append(n)
    for name, noise in by_logger.items():
        logging.getLogger(name).addFilter(_DropNoise(noise))
    for w in WARNING_NOISE:
        warnings.filterwarnings("ignore", message=w.message, category=w.category, module=w.module)


def filterwarnings_lines() -> list[str]:
    """The same warnings as pytest `filterwarnings` lines (pytest resets the warning filters for
    each test, then applies its own)."""
    return [f"ignore:{w.message}:{w.category.__name__}:{w.module}" for w in WARNING_NOISE]
