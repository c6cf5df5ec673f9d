"""A run's configuration: one TOML file per phase, the single source of truth of a run.

The file holds `recipe = "module:function"` (the factory that builds the phase's recipe), a `[run]`
table (the engine's settings, `RunConfig`) and a `[phase]` table (the recipe's own settings).
Any value can be overridden on the command line with `--set run.lr=1e-4` or
`--set phase.lora_rank=16`; an unknown key is refused, never ignored.
"""

from __future__ import annotations

import dataclasses
import importlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).parent / "configs"

MIXED_PRECISION = ("no", "bf16", "fp16")
OPTIMIZERS = ("adamw", "adamw8bit", "cpu_offload")
# transformers.get_scheduler's names the engine supports (each takes warm-up and total steps).
SCHEDULES = ("constant_with_warmup", "linear", "cosine")


class ConfigError(ValueError):
    """A config file or override that cannot describe a run (the message says what and where)."""


@dataclass
class RunConfig:
    """The engine's settings, the same for every phase (`[run]` in the phase's TOML)."""

    max_steps: int = 1000  # optimizer steps
    lr: float = 5e-5
    warmup_steps: int = 0
    schedule: str = "constant_with_warmup"
    batch_size: int = 1  # samples per micro-step over all processes (split between them)
    grad_accum: int = 1  # micro-steps per optimizer step
    mixed_precision: str = "no"
    gradient_checkpointing: bool = False
    seed: int = 0
    save_every: int = 500  # steps between checkpoints (and at the last step)
    log_every: int = 10  # steps between progress-bar updates (losses.jsonl has every step)
    optimizer: str = "adamw"
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0  # 0 turns clipping off
    keep_checkpoints: int = 2  # older checkpoints are deleted once a newer one is written
    validate_every: int = 0  # steps between held-out losses (0: never)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.mixed_precision not in MIXED_PRECISION:
            raise ConfigError(f"run.mixed_precision must be one of {', '.join(MIXED_PRECISION)}, not {self.mixed_precision!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"run.optimizer must be one of {', '.join(OPTIMIZERS)}, not {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"run.schedule must be one of {', '.join(SCHEDULES)}, not {self.schedule!r}")
        for name in ("max_steps", "batch_size", "grad_accum", "save_every", "log_every", "keep_checkpoints"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"run.{name} must be at least 1, not {getattr(self, name)!r}")
        for name in ("warmup_steps", "validate_every", "seed"):
            if int(getattr(self, name)) < 0:
                raise ConfigError(f"run.{name} must not be negative, not {getattr(self, name)!r}")
        if self.lr <= 0:
            raise ConfigError(f"run.lr must be positive, not {self.lr!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class PhaseConfig:
    """One phase's whole config: which recipe, the engine's settings and the recipe's own."""

    recipe: str  # "module:function", called as function(data_dir, phase_table, run) -> Recipe
    run: RunConfig
    phase: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None

    def to_toml(self) -> str:
        """The config as run, overrides included (written beside the checkpoints and in the card)."""
        lines = [f"recipe = {_toml_value(self.recipe)}", "", "[run]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in self.run.to_dict().items()]
        lines += ["", "[phase]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in self.phase.items()]
        return "\n".join(lines) + "\n"

    def make_recipe(self, data: Path) -> Any:
        module_name, _, function = self.recipe.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), function)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"recipe {self.recipe!r} cannot be imported: {exc}") from exc
        return factory(data, self.phase, self.run)


def default_config_path(phase: str) -> Path:
    return CONFIG_DIR / f"phase_{phase}.toml"


def load_config(path: Path, overrides: list[str] | tuple[str, ...] = ()) -> PhaseConfig:
    """Reads a phase's TOML and applies `section.key=value` overrides (values in TOML syntax;
    a bare word is a string)."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    unknown = set(raw) - {"recipe", "run", "phase"}
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))} (expected recipe, [run], [phase])")
    if not isinstance(raw.get("recipe"), str):
        raise ConfigError(f"{path}: `recipe = \"module:function\"` is missing")
    run_table = dict(raw.get("run", {}))
    phase_table = dict(raw.get("phase", {}))
    for item in overrides:
        key, sep, text = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot or section not in ("run", "phase") or not name:
            raise ConfigError(f"--set {item!r}: expected run.KEY=VALUE or phase.KEY=VALUE")
        value = _parse_value(text.strip())
        if section == "phase" and name not in phase_table:
            raise ConfigError(f"--set {item!r}: the phase has no setting {name!r} (it has: {', '.join(sorted(phase_table))})")
        (run_table if section == "run" else phase_table)[name] = value
    return PhaseConfig(recipe=raw["recipe"], run=run_from_dict(run_table), phase=phase_table, source=Path(path))


def run_from_dict(table: dict[str, Any]) -> RunConfig:
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    unknown = set(table) - set(fields)
    if unknown:
        raise ConfigError(f"[run] has no setting {', '.join(sorted(unknown))} (it has: {', '.join(fields)})")
    values: dict[str, Any] = {}
    for name, value in table.items():
        kind = type(getattr(RunConfig(), name))
        try:
            if kind is bool:
                if not isinstance(value, bool):
                    raise ValueError("expected true or false")
                values[name] = value
            elif kind is int:
                if isinstance(value, bool) or float(value) != int(value):
                    raise ValueError("expected a whole number")
                values[name] = int(value)
            else:
                values[name] = kind(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"run.{name} = {value!r}: {exc}") from exc
    return RunConfig(**values)


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word: a string


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise ConfigError(f"cannot write {value!r} as TOML")
