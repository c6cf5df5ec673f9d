"""Settings: environment variables (prefix `ANIMEGAMER_`), an optional `.env`, an optional TOML file.

This module sits at the bottom of the project: it imports nothing of it but its own table of
limits (settings/limits.py), so every layer can read settings. The default film and the films file (`films`) are checked by the game's catalogue
(`game.catalogue.load_checked_settings`), which the commands call at start.

Precedence, highest first: constructor arguments, environment, `.env`, the TOML file named by
`ANIMEGAMER_CONFIG` (or `animegamer.toml` in the working directory when present), defaults.
`DATABASE_URL` is also read without the prefix, as most hosting platforms set it that way.
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from settings.limits import BACKLOG, COOLDOWN_SECONDS, INSTRUCTION_LEN

MAX_SHARD_ID = 65535  # far above any bot's shard count; keeps "0-999999999" from building a huge list


def parse_shard_ids(text: str) -> list[int]:
    """Shard ids from "0-3", "0,2,5" or "0-3,8" (ranges include both ends): sorted, each once.
    ValueError names the part that is not a shard id or a range."""
    ids: set[int] = set()
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise ValueError("no shard ids: give ids and ranges such as 0-3 or 0,2,5")
    for part in parts:
        m = re.fullmatch(r"(\d+)\s*(?:-\s*(\d+))?", part, re.ASCII)
        if m is None:
            raise ValueError(f"{part!r} is not a shard id or a range such as 0-3 (shard ids are 0, 1, 2, ...)")
        first = int(m[1])
        last = int(m[2]) if m[2] is not None else first
        if first > last:
            raise ValueError(f"the range {part!r} goes down: write it {last}-{first}")
        if last > MAX_SHARD_ID:
            raise ValueError(f"shard {last} in {part!r} is beyond any shard count (at most {MAX_SHARD_ID})")
        ids.update(range(first, last + 1))
    return sorted(ids)


def check_shards(shard_ids: list[int] | None, shard_count: int | None) -> None:
    """ValueError unless the shard ids fit the count: ids need a count, and each is below it."""
    if shard_count is not None and shard_count < 1:
        raise ValueError(f"the shard count must be 1 or more, not {shard_count}")
    if shard_ids is None:
        return
    if not shard_ids:
        raise ValueError("no shard ids: give ids and ranges such as 0-3 or 0,2,5")
    if shard_count is None:
        raise ValueError("shard ids need the total shard count too (ANIMEGAMER_SHARD_COUNT)")
    outside = [i for i in shard_ids if not 0 <= i < shard_count]
    if outside:
        raise ValueError(f"shard {outside[0]} is not below the shard count {shard_count}: "
                         f"the shards are numbered 0 to {shard_count - 1}")


def _default_data_dir() -> Path:
    if not os.environ.get("XDG_DATA_HOME") and hasattr(os, "geteuid") and os.geteuid() == 0:
        # As root the embedded Postgres runs as a system user and would have to open /root to it.
        return Path("/var/lib/animegamer")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "animegamer"


def _config_file() -> Path | None:
    explicit = os.environ.get("ANIMEGAMER_CONFIG")
    if explicit:
        return Path(explicit)
    local = Path("animegamer.toml")
    return local if local.is_file() else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ANIMEGAMER_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        validate_default=True,
    )

    # --- connections
    discord_token: SecretStr | None = Field(None, description="Discord bot token")
    database_url: str | None = Field(
        None,
        validation_alias=AliasChoices("ANIMEGAMER_DATABASE_URL", "DATABASE_URL", "database_url"),
        description="postgresql://... ; unset: an embedded Postgres under data_dir",
    )
    data_dir: Path = Field(default_factory=_default_data_dir)

    # --- models and workers
    backend: Literal["preview", "animegamer"] = "preview"
    models_dir: Path | None = None  # default: data_dir / "models"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    history_window: int = Field(2, ge=0, le=5)  # earlier turns shown to the MLLM; 0 = released demo
    decoder_steps: int = Field(50, ge=1, le=200)
    # exact: bit-identical to the released math; fast: compiled, fused (rounding-level changes);
    # fastest: also FP8 linears and a first-block cache (lossy). See docs/performance.md.
    decoder_speed: Literal["exact", "fast", "fastest"] = "exact"
    # Previews of the clip while a turn runs (servers choose with /admin previews; this is the
    # default): at most one per preview_interval seconds, at most preview_max per turn.
    previews: bool = True
    preview_interval: float = Field(5.0, ge=0)
    preview_max: int = Field(4, ge=0, le=20)
    # Where each model runs (unset: `device`). Two GPUs: mllm_device=cuda:0, decoder_device=cuda:1.
    mllm_device: str | None = None
    decoder_device: str | None = None
    # auto: the fastest mode that fits the GPU(s) found at the worker's sessions (logged at start).
    # resident: both models whole on the GPU (~34 GiB at the peak, predicted); low_vram: 8-bit MLLM
    # weights and a tiled VAE (24 GB); offload: one stage's weights on the GPU at a time, 8-bit MLLM
    # (12-16 GB); offload_int4: the same with 4-bit MLLM weights (8 GB). `animegamer doctor` says which fits.
    memory_mode: Literal["auto", "resident", "low_vram", "offload", "offload_int4"] = "auto"
    # `animegamer film prepare`'s captioner: a vision-language model folder (Qwen2-VL, Qwen2.5-VL,
    # InternVL in transformers' format) that --captioner overrides; unset: no captions (film.caption).
    captioner: Path | None = None
    # A worker refuses at start a mode the memory plan predicts will not fit its GPUs; False skips that.
    memory_check: bool = True
    mllm_max_batch: int = Field(4, ge=1, le=32)  # concurrent turns sharing one MLLM pass (worker --concurrency)
    # A worker serving several films: GPU memory (GiB) its films' decoders may take together; the
    # rest wait in pinned CPU memory. None: detected at load (free memory after the MLLM, less 16 GiB).
    decoder_gpu_budget_gb: float | None = Field(None, gt=0)
    # motion level -> motion scope; None: the released batch script's table (game.motion)
    motion_scope: dict[int, float] | None = None
    motion_scope_otherwise: float | None = None
    mp4_max_bytes: int = Field(10 * 1024 * 1024, ge=100_000)
    queue_poll_interval: float = Field(0.3, gt=0, le=10)  # seconds; see docs/queue.md
    stalled_after: float = Field(10.0, gt=0)  # seconds without a heartbeat before a worker counts as dead (heartbeats: every stalled_after / 4)
    # The order workers take turns in: "fair" (servers, then channels, take turns; docs/queue.md) or
    # "fifo" (first come, first served, as before; kept for comparison: positions shown assume fair).
    queue_order: Literal["fair", "fifo"] = "fair"
    # Quotas (0: none): turns a server, and one member, may start per rolling hour; the operator
    # sets a server's own with `animegamer shares set` (docs/queue.md, "Quotas and weights").
    server_turns_per_hour: int = Field(0, ge=0)
    member_turns_per_hour: int = Field(0, ge=0)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(9108, ge=0, le=65535)  # 0 = off
    bot_health_port: int = Field(9109, ge=0, le=65535)  # the bot's /healthz (on metrics_host); 0 = off

    # --- the bot's gateway shards (bot.parts.shards): guild g is on shard (g >> 22) % shard_count, and a bot
    # process runs and claims (posting, vote rounds, jobs) only its shard_ids. Both unset: Discord's
    # recommended count, every shard in this process. shard_count alone: every shard of that count.
    # ANIMEGAMER_SHARD_IDS takes ranges and lists: "0-3", "0,2,5"; `animegamer bot --shards` overrides.
    shard_count: int | None = Field(None, ge=1)
    shard_ids: Annotated[list[int] | None, NoDecode] = None

    # --- game limits (guild settings may tighten them; defaults and bounds: settings/limits.py)
    default_film: str = "qiqi"
    films: Path | None = None  # operator's films file (TOML) adding or overriding films; see docs/films.md
    content_rules: Path | None = None  # operator's blocked terms (TOML) replacing game/content_rules.toml; see docs/bot.md
    max_instruction_len: int = Field(INSTRUCTION_LEN.default, ge=INSTRUCTION_LEN.low, le=INSTRUCTION_LEN.high)
    cooldown_seconds: float = Field(COOLDOWN_SECONDS.default, ge=COOLDOWN_SECONDS.low, le=COOLDOWN_SECONDS.high)
    export_cooldown_seconds: float = Field(60.0, ge=0)  # per member, after each delivered /export
    backlog_cap: int = Field(BACKLOG.default, ge=BACKLOG.low, le=BACKLOG.high)  # queued+running turns per session
    idle_pause_minutes: float = Field(120.0, gt=0)
    blob_retention_days: float = Field(30.0, gt=0)
    # A server that removed the bot: its data is deleted this many days later unless the bot is added back.
    guild_data_days: float = Field(30.0, gt=0)

    # --- languages (i18n/): every text in the pseudo-locale (accented, between ⟦ ⟧) to find strings
    # that bypass the catalogs; for translators and the tests, never for players
    pseudo_locale: bool = False

    # --- local play page
    play_host: str = "127.0.0.1"
    play_port: int = Field(8080, ge=0, le=65535)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources = [init_settings, env_settings, dotenv_settings]
        path = _config_file()
        if path is not None:
            if not path.is_file():
                raise SettingsError(f"config file {path} (ANIMEGAMER_CONFIG) does not exist")
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    @field_validator("films", "content_rules", "captioner", "decoder_gpu_budget_gb", "shard_count", "shard_ids", mode="before")
    @classmethod
    def _unset_when_empty(cls, v):
        return None if v == "" else v  # compose passes an unset ${VAR:-} as ""

    @field_validator("shard_ids", mode="before")
    @classmethod
    def _shard_ranges(cls, v):
        if not isinstance(v, str):
            return v
        text = v.strip()
        if text.startswith("[") and text.endswith("]"):  # a JSON list, as pydantic-settings reads lists
            text = text[1:-1]
        return parse_shard_ids(text) if text else None  # "": unset (compose's ${VAR:-})

    @field_validator("shard_ids")
    @classmethod
    def _shards_fit_the_count(cls, v: list[int] | None, info: ValidationInfo) -> list[int] | None:
        if v is None or "shard_count" not in info.data:  # a bad count is reported on its own
            return v
        ids = sorted(set(v))
        if any(i < 0 for i in ids):
            raise ValueError("shard ids are 0 or more")
        check_shards(ids, info.data["shard_count"])
        return ids

    @field_validator("database_url")
    @classmethod
    def _pg_url(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        if not v.startswith(("postgresql://", "postgres://", "postgresql+asyncpg://", "postgresql+psycopg://")):
            raise ValueError("must be a postgresql:// URL")
        return v

    @cached_property
    def model_root(self) -> Path:
        return self.models_dir or self.data_dir / "models"


class SettingsError(RuntimeError):
    """Settings that cannot be used; the message names the setting."""


def load_settings(**overrides) -> Settings:
    """Settings from the environment, with a readable error naming each bad setting."""
    try:
        return Settings(**overrides)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "settings"
            env = loc.upper() if loc.upper().startswith("ANIMEGAMER_") else "ANIMEGAMER_" + loc.upper()
            if env == "ANIMEGAMER_DATABASE_URL":
                env += " or DATABASE_URL"
            lines.append(f"  {env}: {err['msg']}")
        raise SettingsError("invalid settings:\n" + "\n".join(lines)) from None
