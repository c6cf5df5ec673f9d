"""A models directory in the released layouts (inference.model_paths), made of tiny random models:
one tokenizer and Mistral shared by the films, and per film an agent checkpoint and a converted
decoder. What `animegamer models download` would leave, for the worker, the backends and benches."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from diffusers import AutoencoderKLCogVideoX

from game.catalogue import FILMS
from inference.decoder.transformer import AnimeGamerTransformer3DModel
from inference.model_paths import film_paths
from testkit.tiny import mllm as tiny
from testkit.tiny.decoder import TINY_SIZE, TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG

REP_DIM = TINY_TRANSFORMER_CONFIG["text_embed_dim"]


def build_models_dir(root: Path, seeds: Mapping[str, tuple[int, int]]) -> Path:
    """`seeds`: film id -> (agent seed, decoder seed); different seeds give different films."""
    first = film_paths(root, FILMS[next(iter(seeds))])
    tiny.build_tokenizer(first.tokenizer)
    tiny.build_mistral(first.mistral)
    for film, (agent_seed, decoder_seed) in seeds.items():
        paths = film_paths(root, FILMS[film])
        paths.agent_dir.mkdir(parents=True, exist_ok=True)
        sd = tiny.released_state_dict(paths.mistral, seed=agent_seed, rep_dim=REP_DIM)
        tiny.write_checkpoint(sd, paths.agent_dir / "pytorch_model.bin")
        torch.manual_seed(decoder_seed)
        AnimeGamerTransformer3DModel(**TINY_TRANSFORMER_CONFIG).save_pretrained(paths.decoder / "transformer")
        AutoencoderKLCogVideoX(**TINY_VAE_CONFIG).save_pretrained(paths.decoder / "vae")
        (paths.decoder / "decoder.json").write_text(json.dumps({"num_latent_frames": 5, "fps": 8, **TINY_SIZE}))
    return root
