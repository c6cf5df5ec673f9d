"""Where model files live under the models directory: the one place that knows the layout.

    <models>/mistral-7b-instruct-v0.1/          Mistral-7B-Instruct-v0.1 (base LLM, HF layout)
    <models>/animegamer/<mllm_checkpoint>/pytorch_model.bin     a film's MLLM agent checkpoint
    <models>/animegamer/<decoder_checkpoint>/latest, <iter>/mp_rank_00_model_states.pt   SAT decoder
    <models>/animegamer-tokenizer/              the AnimeGamer tokenizer (Mistral's + 284 added tokens)
    <models>/cogvideox-vae/                     CogVideoX 3D VAE (diffusers layout, or 3d-vae.pt)
    <models>/converted/<film id>/decoder/       the film's decoder converted to diffusers/safetensors

The checkpoint folders are named by the film catalogue (game/films.toml: MLLM-Qiqi,
VDM_Decoder-Qiqi for the released films) so a directory downloaded from the model hub can be used
as it is, and an operator's custom film names its own folders.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from game.catalogue import Film

MISTRAL_DIR = "mistral-7b-instruct-v0.1"
TOKENIZER_DIR = "animegamer-tokenizer"
RELEASE_DIR = "animegamer"
VAE_DIR = "cogvideox-vae"
CONVERTED_DIR = "converted"


@dataclass(frozen=True)
class FilmModelPaths:
    mistral: Path
    tokenizer: Path
    agent_dir: Path  # holds pytorch_model.bin or model.safetensors
    decoder_sat: Path  # released SAT decoder directory
    vae: Path
    decoder: Path  # converted decoder (what the worker loads)

    def agent_checkpoint(self) -> Path | None:
        for name in ("pytorch_model.bin", "model.safetensors", "pytorch_model.safetensors"):
            p = self.agent_dir / name
            if p.is_file():
                return p
        return None


def film_paths(models_root: Path, film: Film) -> FilmModelPaths:
    root = Path(models_root)
    return FilmModelPaths(
        mistral=root / MISTRAL_DIR,
        tokenizer=root / TOKENIZER_DIR,
        agent_dir=root / RELEASE_DIR / film.mllm_checkpoint,
        decoder_sat=root / RELEASE_DIR / film.decoder_checkpoint,
        vae=root / VAE_DIR,
        decoder=root / CONVERTED_DIR / film.id / "decoder",
    )
