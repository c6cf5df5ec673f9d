"""What model files are on disk for a film (`animegamer models list`, `doctor`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from game.catalogue import Film
from inference.model_paths import FilmModelPaths, film_paths


@dataclass(frozen=True)
class Component:
    name: str
    path: Path
    present: bool
    detail: str
    for_worker: bool  # the worker loads it; otherwise only the conversion reads it


def _size(paths) -> str:
    total = sum(p.stat().st_size for p in paths if p.is_file())
    return f"{total / 1e9:.1f} GB" if total >= 1e8 else f"{total / 1e6:.1f} MB"


def _files(directory: Path, *patterns: str) -> list[Path]:
    return sorted({p for pat in patterns for p in directory.glob(pat)}) if directory.is_dir() else []


def inventory(models_root: Path, film: Film) -> list[Component]:
    """Each model part a film needs, present or not (used by `models list` and `doctor`)."""
    p: FilmModelPaths = film_paths(models_root, film)
    out = []

    weights = _files(p.mistral, "*.safetensors", "pytorch_model*.bin")
    ok = (p.mistral / "config.json").is_file() and bool(weights)
    out.append(Component("base LLM (Mistral-7B-Instruct-v0.1)", p.mistral, ok,
                         _size(weights) if ok else "config.json and weights needed", True))

    ok = (p.tokenizer / "tokenizer_config.json").is_file()
    out.append(Component("AnimeGamer tokenizer", p.tokenizer, ok, "" if ok else "tokenizer_config.json needed", True))

    agent = p.agent_checkpoint()
    out.append(Component(f"MLLM agent ({film.mllm_checkpoint})", p.agent_dir, agent is not None,
                         _size([agent]) if agent else "pytorch_model.bin needed", True))

    sat_weights = _sat_weights(p.decoder_sat)
    out.append(Component(f"released decoder ({film.decoder_checkpoint})", p.decoder_sat, sat_weights is not None,
                         _size([sat_weights]) if sat_weights else "latest + <iter>/mp_rank_00_model_states.pt needed", False))

    vae = _files(p.vae, "*.safetensors", "3d-vae.pt")
    ok = bool(vae) and ((p.vae / "config.json").is_file() or (p.vae / "3d-vae.pt").is_file())
    out.append(Component("CogVideoX VAE", p.vae, ok, _size(vae) if ok else "config.json + weights, or 3d-vae.pt needed", False))

    conv = [p.decoder / "decoder.json", p.decoder / "transformer" / "config.json", p.decoder / "vae" / "config.json"]
    conv_weights = _files(p.decoder, "transformer/*.safetensors", "vae/*.safetensors")
    ok = all(f.is_file() for f in conv) and len(conv_weights) >= 2
    out.append(Component("converted decoder", p.decoder, ok,
                         _size(conv_weights) if ok else "run `animegamer models download` (it converts)", True))
    return out


def _sat_weights(sat_dir: Path) -> Path | None:
    latest = sat_dir / "latest"
    if not latest.is_file():
        return None
    f = sat_dir / latest.read_text().strip() / "mp_rank_00_model_states.pt"
    return f if f.is_file() else None
