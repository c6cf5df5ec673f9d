"""What the worker plays: the MLLM as a released-format agent checkpoint, and the films-file entry
that names the new film's folders and cast."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import torch

from inference.mllm.loading import OPTIONAL_MODEL_KEYS
from inference.mllm.model import AnimeGamerMLLM

FILMS_FILE = "films.toml"


def agent_state_dict(mllm: AnimeGamerMLLM, dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
    """The unmerged model's state dict under the released names (the model is built as the release
    built it, so its names are the released ones; the loader's renames only undo other writers'
    prefixes). The frozen base weights and peft's frozen norm copies are left out: the loader
    takes them from the Mistral folder (inference.mllm.loading.OPTIONAL_MODEL_KEYS)."""
    state = {}
    for key, value in mllm.state_dict().items():
        if any(p.search(key) for p in OPTIONAL_MODEL_KEYS):
            continue
        state[key] = value.detach().to("cpu", dtype if value.is_floating_point() else value.dtype).contiguous()
    return state


def save_agent_checkpoint(mllm: AnimeGamerMLLM, path: Path, dtype: torch.dtype = torch.bfloat16) -> Path:
    """`pytorch_model.bin` (a torch state dict, as released), written whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(agent_state_dict(mllm, dtype), tmp)
    tmp.replace(path)
    return path


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def film_entry(film_id: str, title: str, mllm_dir: Path, decoder_dir: Path, cast: Sequence[dict[str, str]]) -> str:
    """The `[films.ID]` table for a films file (game/films.toml's form), checked by the game's own
    parser before it is returned."""
    from game.films_file import parse_films

    characters = ",\n".join(f"    {{ id = {_toml_string(c['id'])}, name = {_toml_string(c['name'])} }}" for c in cast)
    text = (f"[films.{film_id}]\n"
            f"title = {_toml_string(title)}\n"
            f"mllm_checkpoint = {_toml_string(Path(mllm_dir).name)}\n"
            f"decoder_checkpoint = {_toml_string(Path(decoder_dir).name)}\n"
            f"characters = [\n{characters},\n]\n")
    import tomllib

    parse_films(tomllib.loads(text), f"the films entry of {film_id}", base={})  # raises CatalogueError
    return text


def write_film_entry(out: Path, film_id: str, title: str, mllm_dir: Path, decoder_dir: Path,
                     cast: Sequence[dict[str, str]]) -> Path:
    """Writes (or replaces) the film's table in `out/films.toml` and returns the file's path.
    Phase (b) names the MLLM folder, phase (a)/(c) the decoder folder: whichever exports last
    writes the entry with both (the other's folder name is predictable: see docs/training.md)."""
    entry = film_entry(film_id, title, mllm_dir, decoder_dir, cast)
    path = Path(out) / FILMS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    kept = _without_film(old, film_id).rstrip()
    header = ("# Films trained with `animegamer train` (docs/training.md). `animegamer train install RUN...`\n"
              "# puts the models where the worker looks and this table into your films file.\n")
    body = (kept + "\n\n" if kept else header + "\n") + entry
    path.write_text(body, encoding="utf-8")
    return path


def _without_film(text: str, film_id: str) -> str:
    """The films file's text without the tables of `film_id` ([films.ID] and [films.ID.*])."""
    out, owner = [], None
    for line in text.splitlines(keepends=True):
        header = re.match(r"^\[films\.([a-z0-9_-]+)[.\]]", line)
        if header:
            owner = header.group(1)
        if owner != film_id:
            out.append(line)
    return "".join(out)
