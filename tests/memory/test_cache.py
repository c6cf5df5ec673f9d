"""The memory plan's answer cached on disk: used at the second start, traced again when a key part
changes (here at tiny sizes: the same code as the full-size plan, in seconds)."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
import torch

from inference.memory import cache
from inference.memory.plan import VAE_TILES, Shapes


@pytest.fixture(scope="module")
def tiny_shapes() -> Shapes:
    from testkit.tiny import mllm as tiny_mllm
    from testkit.tiny.decoder import TINY_SIZE, TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG

    return Shapes(tiny_mllm.tiny_config(vocab_size=32284).to_dict(), dict(TINY_TRANSFORMER_CONFIG),
                  dict(TINY_VAE_CONFIG), dict(TINY_SIZE), rep_dim=TINY_TRANSFORMER_CONFIG["text_embed_dim"])


def test_a_cached_plan_is_used_at_the_second_start_and_traced_again_when_a_key_part_changes(tmp_path, tiny_shapes,
                                                                                               monkeypatch):
    tiles = ((TINY_SIZE_H := tiny_shapes.size["height"], tiny_shapes.size["width"]),)
    kw = dict(sessions=(1,), modes=("low_vram", "offload"), shapes=tiny_shapes, cache_dir=tmp_path, device="cpu",
              processes=1, tiles=tiles)
    first, hit = cache.cached_predict(**kw)
    assert not hit and len(list(tmp_path.glob("*.json"))) == 1
    t = time.perf_counter()
    second, hit = cache.cached_predict(**kw)
    assert hit and time.perf_counter() - t < 1.0
    assert second == first  # every stage's bytes, the tiles and the bytes moved, read back
    assert [p.tiles for p in second if p.mode == "offload"] == [(TINY_SIZE_H, tiny_shapes.size["width"])]
    # Each part of the key traces again: sessions, the model config, the modes, a library version.
    changed = [dict(kw, sessions=(2,)), dict(kw, shapes=dataclasses.replace(tiny_shapes, history=1)),
               dict(kw, modes=("low_vram",))]
    for k in changed:
        assert not cache.cached_predict(**k)[1]
    real = cache.versions()
    monkeypatch.setattr(cache, "versions", lambda: {**real, "torch": "0.0-other"})
    assert not cache.cached_predict(**kw)[1]
    monkeypatch.setattr(cache, "versions", lambda: real)
    assert cache.cached_predict(**kw)[1]
    # A damaged file is traced again and rewritten, not trusted.
    path = tmp_path / f"{cache.key(tiny_shapes, (1,), ('low_vram', 'offload'), tiles, 'cpu')}.json"
    path.write_text("{not json")
    preds, hit = cache.cached_predict(**kw)
    assert not hit and preds == first and json.loads(path.read_text())["predictions"]


def test_the_offload_tiles_give_whole_frames():
    """diffusers' tiled decode pads tiles that do not divide the frame with its overlap: every tile
    size the plan may pick must give 480x720 frames."""
    from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG
    from inference.decoder.vae import COGVIDEOX_VAE_CONFIG, decode_latents
    from inference.memory.fake_models import build_decoder

    for tiles in VAE_TILES:
        dec = build_decoder(torch.float16, dict(ANIMEGAMER_2B_CONFIG), dict(COGVIDEOX_VAE_CONFIG),
                            {"height": 480, "width": 720}, True, tiles=tiles)
        with torch.no_grad():
            video = decode_latents(dec.vae, torch.empty((1, *dec.latent_shape), device="meta"))
        assert tuple(video.shape[-2:]) == (480, 720), tiles
