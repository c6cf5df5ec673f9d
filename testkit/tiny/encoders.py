"""Tiny random stand-ins for the frozen encoders film.features runs, in the layouts users download:

- a converted decoder folder's `vae/`: AutoencoderKLCogVideoX with the tiny channels of
  testkit.tiny.decoder and the real 480x720 sample size, whose halves are the tiles tiling cuts
  (even this VAE takes 10-30 s on a 17-frame 480x720 clip on a 2-core CPU, tiled into 240x360
  tiles as the real one: 5 x 60 x 90 latents; diffusers' tiling gives wrong sizes for small
  sample sizes whose tile overlaps are not whole latent pixels, e.g. 9 rows for a 64 px clip);
- a CLIP folder as laion's and OpenAI's ship it: a whole CLIPModel (text and vision towers), of
  which CLIPVisionModel loads the vision tower; 64 px images in 16 px patches (16 tokens);
- a CogVideoX-style folder for T5: `text_encoder/` (a T5 v1.1-style T5EncoderModel, gated GELU)
  and `tokenizer/` (transformers' T5Tokenizer built from a small unigram vocabulary).
"""

from __future__ import annotations

import string
from pathlib import Path

import torch
from diffusers import AutoencoderKLCogVideoX

from testkit.tiny.decoder import TINY_VAE_CONFIG

VAE_CONFIG = {**TINY_VAE_CONFIG, "sample_height": 480, "sample_width": 720}
CLIP_VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3, "num_attention_heads": 2,
               "image_size": 64, "patch_size": 16}
T5_D_MODEL = 32


def build_vae(decoder_dir: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    AutoencoderKLCogVideoX(**VAE_CONFIG).save_pretrained(str(decoder_dir / "vae"))
    return decoder_dir


def build_clip(directory: Path, seed: int = 0, **vision) -> Path:
    """vision: CLIP_VISION overrides, e.g. image_size=56, patch_size=4 for ViT-B/16's 196 tokens,
    which the decoder's 226 conditioning tokens need beside T5's 30 (training)."""
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(seed)
    config = CLIPConfig(
        text_config={"vocab_size": 99, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 16},
        vision_config={**CLIP_VISION, **vision, "hidden_act": "gelu"}, projection_dim=16,
    )
    CLIPModel(config).save_pretrained(str(directory))
    return directory


def build_t5(directory: Path, seed: int = 0) -> Path:
    from transformers import T5Config, T5EncoderModel, T5Tokenizer

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    pieces += [(c, -3.0) for c in string.ascii_letters + string.digits + string.punctuation]
    pieces += [("▁" + w, -1.0) for w in ("Character", "Motion", "Background", "Qiqi", "Jiji", "walk", "run", "the")]
    tokenizer = T5Tokenizer(vocab=pieces, extra_ids=0)
    tokenizer.save_pretrained(str(directory / "tokenizer"))
    torch.manual_seed(seed)
    config = T5Config(vocab_size=len(pieces), d_model=T5_D_MODEL, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      feed_forward_proj="gated-gelu", is_encoder_decoder=False, use_cache=False)
    T5EncoderModel(config).save_pretrained(str(directory / "text_encoder"))
    return directory
