"""Download a film's models into the layout of inference.model_paths, then finish them.

Three hub repositories:

    <film's hub_repo> (TencentARC/AnimeGamer)   <mllm_checkpoint>/, <decoder_checkpoint>/  -> <models>/animegamer/
    mistralai/Mistral-7B-Instruct-v0.1          safetensors, config, tokenizer             -> <models>/mistral-7b-instruct-v0.1/
    THUDM/CogVideoX-2b                          vae/ (diffusers layout)                    -> <models>/cogvideox-vae/

then the AnimeGamer tokenizer is built and the decoder converted. The checkpoint folders and the
repository come from the film catalogue; a film without a hub repository (an operator's own
checkpoint) is copied in by hand.
"""

from __future__ import annotations

from pathlib import Path

from game.catalogue import Film
from inference.hub_client import Fetch, ModelsError, fetch, hub_endpoint, probe_hub
from inference.model_paths import FilmModelPaths, film_paths

MISTRAL_REPO = "mistralai/Mistral-7B-Instruct-v0.1"
VAE_REPO = "THUDM/CogVideoX-2b"
TOKENIZER_SOURCE = "https://github.com/TencentARC/AnimeGamer (folder animegamer_tokenizer/)"


def fetch_plan(models_root: Path, film: Film) -> list[Fetch]:
    paths = film_paths(models_root, film)
    release_dir = paths.agent_dir.parent  # both checkpoint folders sit under <models>/animegamer
    if film.hub_repo is None:
        raise ModelsError(
            f"film {film.id!r} ({film.source}) names no hub_repo, so its checkpoints are not downloadable: copy "
            f"{film.mllm_checkpoint}/ and {film.decoder_checkpoint}/ into {release_dir} by hand, "
            "then download another film for Mistral and the VAE, or copy them too (`animegamer models list` shows the layout)")
    return [
        Fetch(
            f"AnimeGamer checkpoints for {film.title}",
            film.hub_repo,
            (f"{paths.agent_dir.name}/*", f"{paths.decoder_sat.name}/*"),
            release_dir,
        ),
        # Safetensors only: the repo also carries the same weights as .bin (another 14 GB).
        Fetch("Mistral-7B-Instruct-v0.1 (base LLM)", MISTRAL_REPO, ("*.json", "*.safetensors", "tokenizer.model"), paths.mistral),
        # The VAE is a subfolder of the CogVideoX-2b repo: fetched into a staging folder (so
        # resuming works) and hard-linked into the layout's cogvideox-vae/.
        Fetch(
            "CogVideoX 3D VAE", VAE_REPO, ("vae/*",), Path(models_root) / ".hub" / VAE_REPO.replace("/", "--"),
            link_from="vae", target=paths.vae,
        ),
    ]


def build_tokenizer(paths: FilmModelPaths, log=print) -> bool:
    """The AnimeGamer tokenizer is not on the hub: built from Mistral's by inference.mllm when
    that code provides a builder; otherwise the manual step is printed. Returns whether it exists."""
    if (paths.tokenizer / "tokenizer_config.json").is_file():
        return True
    try:
        from inference.mllm.tokens import build_released_tokenizer
    except ImportError:
        log(f"AnimeGamer tokenizer: not built here (this version has no builder). Copy the released "
            f"tokenizer from {TOKENIZER_SOURCE} to {paths.tokenizer}.")
        return False
    log(f"AnimeGamer tokenizer: building from Mistral's -> {paths.tokenizer}")
    build_released_tokenizer(paths.mistral, paths.tokenizer)
    return True


def vae_source(vae_dir: Path) -> Path:
    """What the converter gets for the VAE: the SAT 3d-vae.pt when one was put there by hand
    (what the release used), else the diffusers folder fetched from CogVideoX-2b."""
    sat = vae_dir / "3d-vae.pt"
    return sat if sat.is_file() else vae_dir


def convert(paths: FilmModelPaths, log=print) -> None:
    if (paths.decoder / "decoder.json").is_file():
        log(f"decoder: already converted in {paths.decoder}")
        return
    try:
        from inference.decoder.convert import convert_decoder
    except ImportError as e:
        raise ModelsError(
            f"the decoder converter (inference.decoder.convert) cannot be imported ({e}). The download is "
            "complete; convert later by rerunning this command, or skip it with --skip-decoder-convert.") from e
    vae = vae_source(paths.vae)
    log(f"decoder: converting {paths.decoder_sat} (VAE: {vae}) -> {paths.decoder}")
    try:
        convert_decoder(str(paths.decoder_sat), str(vae), str(paths.decoder))
    except ValueError as e:  # the converter's ConversionError
        raise ModelsError(
            f"decoder conversion failed: {e}\nThe download is complete; to convert by hand: "
            f"animegamer convert-decoder {paths.decoder_sat} {vae} {paths.decoder}") from e


def download(models_root: Path, film: Film, skip_convert: bool = False, endpoint: str | None = None, log=print) -> None:
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise ModelsError("huggingface_hub is not installed: install the project's `models` extra "
                          "(pip install 'animegamer-discord[models]') or use the worker image.") from None
    plan = fetch_plan(models_root, film)
    endpoint = endpoint or hub_endpoint()
    probe_hub(endpoint)
    for item in plan:
        fetch(item, endpoint, log)
    paths = film_paths(models_root, film)
    build_tokenizer(paths, log)
    if skip_convert:
        log("decoder: conversion skipped (--skip-decoder-convert)")
    else:
        convert(paths, log)
