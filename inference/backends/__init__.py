"""Backends: the factory that the worker uses to build one from settings.

"preview" needs no model (inference.backends.preview); "animegamer" is the real model
(inference.backends.animegamer for one film, inference.backends.multifilm for several on one
base model; imported only when asked for, so the preview path never imports torch), from the
checkpoints under settings.model_root.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from inference.backend import Backend

if TYPE_CHECKING:  # settings (pydantic) stays out of the model stack's imports: bench/gpu.py runs without it
    from settings import Settings

log = logging.getLogger(__name__)

BACKENDS = ("preview", "animegamer")


class BackendUnavailable(RuntimeError):
    """The backend cannot be built here; the message says why and what to do."""


def make_backend(settings: Settings, name: str | None = None, *, films: Sequence[str] = (), sessions: int = 1,
                 **options) -> Backend:
    """Build (not load) the backend `name` (default: settings.backend) for `films`; `sessions`:
    the turns the worker runs at once (what ANIMEGAMER_MEMORY_MODE=auto fits the GPU for).

    Preview options: render, frames, width, height, fps, delay (see PreviewBackend)."""
    name = name or settings.backend
    if name == "preview":
        from inference.backends.preview import PreviewBackend

        return PreviewBackend(
            max_bytes=settings.mp4_max_bytes,
            scope_mapping=settings.motion_scope,
            scope_otherwise=settings.motion_scope_otherwise,
            **options,
        )
    if name == "animegamer":
        return _animegamer(settings, films, sessions, **options)
    raise BackendUnavailable(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")


def _animegamer(settings: Settings, films: Sequence[str], sessions: int = 1, **options) -> Backend:
    """The model backend for one film or several: their MLLM checkpoints and converted decoders, found
    under settings.model_root (the layout of inference.model_paths). Nothing heavy is imported
    or loaded here; the worker calls load()."""
    from game.catalogue import FILMS

    try:
        from inference.backends.animegamer import AnimeGamerBackend, AnimeGamerSettings
        from inference.memory.plan import OFFLOAD_MODES, QUANTIZE
        from inference.model_paths import film_paths
    except ImportError as e:
        raise BackendUnavailable(
            f"the AnimeGamer backend cannot be imported ({e}). Install the model extras "
            "(pip install 'animegamer-discord[models]') on a GPU machine, or run a preview "
            "worker with --backend preview."
        ) from e
    if not films:
        raise BackendUnavailable("a model worker needs its film(s): start it with --film FILM[,FILM...] or --film all")
    memory = _memory_mode(settings, sessions)
    quantize = QUANTIZE.get(memory.mode)
    if len(films) > 1 and quantize:
        # int8/int4 weights need the film's LoRA merged in, which one base shared by several films cannot be
        raise BackendUnavailable(
            f"ANIMEGAMER_MEMORY_MODE={memory.mode} serves one film per worker ({memory.why}): start one worker "
            "per film with --film FILM, or use a GPU with room for every film (see docs/performance.md)"
        )
    all_paths = {f: film_paths(settings.model_root, FILMS[f]) for f in films}
    agents = _agent_checkpoints(all_paths)
    paths = all_paths[films[0]]
    device = None if settings.device == "auto" else settings.device  # None: the MLLM picks (cuda if present)
    dtype = None if settings.dtype == "auto" else settings.dtype
    mllm_only = bool(options.pop("mllm_only", False))
    widths = {f: 1920 if mllm_only else _decoder_width(p.decoder) for f, p in all_paths.items()}
    if len(set(widths.values())) > 1:
        raise BackendUnavailable(f"these films' decoders take different representation widths ({widths}): serve them from separate workers")
    low_vram = memory.mode != "resident" and memory.mode != "two_gpus"  # the VAE tiled
    mllm_device, decoder_device = settings.mllm_device, settings.decoder_device
    if memory.mode == "two_gpus" and not (mllm_device and decoder_device):  # auto's pick
        mllm_device, decoder_device = "cuda:0", "cuda:1"
    ag = AnimeGamerSettings(
        mistral_dir=paths.mistral, tokenizer_dir=paths.tokenizer, agent_path=agents[films[0]],
        device=mllm_device or device, dtype=dtype, quantize=quantize, offload=memory.mode in OFFLOAD_MODES,
        history_window=settings.history_window, mllm_only=mllm_only, rep_dim=widths[films[0]],
        motion_scope_map=settings.motion_scope, motion_scope_otherwise=settings.motion_scope_otherwise,
        max_batch=settings.mllm_max_batch,
    )

    def decoder_factory(film: str, on_device: bool = True):
        return _decoder_loader(settings, all_paths[film].decoder, memory, decoder_device or device, dtype,
                               low_vram=low_vram, on_device=on_device)

    if len(films) == 1:  # one film: the LoRA merged into the weights (faster), its decoder on the GPU
        return AnimeGamerBackend(ag, decoder_factory=None if ag.mllm_only else decoder_factory(films[0]), **options)
    from inference.backends.multifilm import MultiFilmBackend

    budget = None if settings.decoder_gpu_budget_gb is None else int(settings.decoder_gpu_budget_gb * 2**30)
    factories = None if mllm_only else {f: decoder_factory(f, on_device=False) for f in films}
    return MultiFilmBackend(ag, agents, decoder_factories=factories, decoder_budget_bytes=budget, **options)


def _agent_checkpoints(all_paths: dict) -> dict:
    """Each film's MLLM checkpoint; BackendUnavailable naming the download for a missing one."""
    from game.catalogue import FILMS

    agents = {}
    for f, paths in all_paths.items():
        agents[f] = paths.agent_checkpoint()
        if agents[f] is None:
            raise BackendUnavailable(
                f"no MLLM checkpoint for {FILMS[f].title} in {paths.agent_dir}: run `animegamer models download {f}`"
            )
    return agents


def _decoder_loader(settings: Settings, decoder_dir, memory, device: str | None, dtype: str | None, *,
                    low_vram: bool, on_device: bool):
    """A function that loads one film's decoder when the backend loads (on `device`, default: the
    GPU if there is one; `on_device=False`: on the CPU, for the residency manager to move)."""

    def load():
        import torch

        from inference.decoder import load_decoder, warm_up_compiled

        on = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # The release runs the DiT in fp16 on GPU; fp16 on a CPU is slow or unsupported.
        dit_dtype = dtype or ("float16" if str(on).startswith("cuda") else "float32")
        # Several films: loaded on the CPU; the residency manager decides what goes to the GPU.
        dec = load_decoder(
            str(decoder_dir), device=on if on_device else "cpu", dtype=getattr(torch, dit_dtype),
            steps=settings.decoder_steps, speed=settings.decoder_speed, low_vram=low_vram,
            runs_on=None if on_device else on,
        )
        if memory.tiles:  # the largest VAE tile that fits the card (the offload modes)
            dec.vae.enable_tiling(tile_sample_min_height=memory.tiles[0], tile_sample_min_width=memory.tiles[1])
        if on_device:  # several films: warmed up on the GPU by MultiFilmBackend.load
            warm_up_compiled(dec, settings.mllm_max_batch)
        return dec

    return load


def _memory_mode(settings: Settings, sessions: int):
    """The memory mode this worker runs (ANIMEGAMER_MEMORY_MODE, auto resolved for its GPUs), logged."""
    from inference.memory.choose_mode import resolve

    memory = resolve(settings, sessions)
    log.info("GPU memory mode: %s", memory.why if settings.memory_mode == "auto" else memory.mode)
    return memory


def _decoder_width(decoder_dir) -> int:
    """The representation width the converted decoder takes (1920 for the released model);
    the MLLM's projections must produce the same."""
    import json

    config = decoder_dir / "transformer" / "config.json"
    if not config.is_file():
        raise BackendUnavailable(
            f"no converted decoder in {decoder_dir}: run `animegamer models download FILM` "
            "(or `animegamer convert-decoder`)"
        )
    return int(json.loads(config.read_text())["text_embed_dim"])
