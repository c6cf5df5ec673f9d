"""The diffusers internals the decoder relies on (inference/decoder/diffusers_api.py) still behave
as they did in the checked version; a failure names the installed diffusers version."""

from __future__ import annotations

import numpy as np
import torch

from inference.decoder import diffusers_api as api
from inference.decoder.transformer import AnimeGamerAttnProcessor, AnimeGamerTransformer3DModel
from inference.decoder.vae import latent_chunks
from testkit.tiny.decoder import TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG

CHANGED = f"diffusers {api.version()} (wrappers checked against {api.CHECKED_VERSION}) changed: "


def _model() -> AnimeGamerTransformer3DModel:
    torch.manual_seed(0)
    return AnimeGamerTransformer3DModel(**TINY_TRANSFORMER_CONFIG).eval()


def test_set_attention_backend_reaches_our_processor():
    model = _model()
    model.set_attention_backend("_native_math")
    processors = [b.attn1.processor for b in model.transformer_blocks]
    assert all(isinstance(p, AnimeGamerAttnProcessor) for p in processors)
    assert all(getattr(getattr(p, "_attention_backend", None), "value", None) == "_native_math" for p in processors), (
        CHANGED + "set_attention_backend() no longer writes `_attention_backend` on the processors"
    )


def test_another_models_backend_does_not_reach_ours():
    """set_attention_backend() also sets the dispatcher's process-wide default: a decoder set to
    cuDNN (a `fast` preset, here never run: this machine has no CUDA) must not move the attention
    of another decoder in the same process, e.g. the bench's `exact` rows after its `fast` one."""
    ours = _model()
    x = torch.randn(2, 4, TINY_TRANSFORMER_CONFIG["in_channels"], 8, 12)
    ctx = torch.randn(2, TINY_TRANSFORMER_CONFIG["max_text_seq_length"], TINY_TRANSFORMER_CONFIG["text_embed_dim"])
    t, scope = torch.tensor([500, 500]), torch.tensor([2.5, 2.5])
    with torch.no_grad():
        before = ours.predict_v(x, ctx, t, scope)
        _model().set_attention_backend("_native_cudnn")
        after = ours.predict_v(x, ctx, t, scope)  # would fail on a CPU if it went to cuDNN
    torch.testing.assert_close(after, before, rtol=0, atol=0)


def test_parent_is_built_without_its_motion_scope_embedding_and_config_keeps_ours(tmp_path):
    model = _model()
    width = TINY_TRANSFORMER_CONFIG["num_attention_heads"] * TINY_TRANSFORMER_CONFIG["attention_head_dim"]
    assert model.ofs_embedding.linear_1.in_features == width  # ours: DiT-wide sinusoid
    assert model.config.ofs_embed_dim == TINY_TRANSFORMER_CONFIG["ofs_embed_dim"], CHANGED + "register_to_config"
    model.save_pretrained(tmp_path)
    again = AnimeGamerTransformer3DModel.from_pretrained(tmp_path)
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), k


def _forward(model, seed=1):
    g = torch.Generator().manual_seed(seed)
    c = TINY_TRANSFORMER_CONFIG
    x = torch.randn(2, 5, c["in_channels"], 4, 6, generator=g)
    ctx = torch.randn(2, 226, c["text_embed_dim"], generator=g)
    with torch.no_grad():
        return model.predict_v(x, ctx, torch.tensor([999, 500]), torch.tensor([2.5, 10.0]))


def test_fused_qkv_is_read_by_our_processor_and_matches():
    model = _model()
    before = _forward(model)
    assert api.fuse_qkv(model) == TINY_TRANSFORMER_CONFIG["num_layers"], CHANGED + "Attention.fuse_projections"
    attn = model.transformer_blocks[0].attn1
    assert attn.fused_projections and isinstance(attn.processor, AnimeGamerAttnProcessor)
    attn.to_q.weight.data.zero_()  # prove the fused projection is the one in use
    torch.testing.assert_close(_forward(model), before, rtol=1e-5, atol=1e-5)


def test_cache_hooks_state_resets_between_clips():
    model = _model()
    model.enable_cache(api.FirstBlockCacheConfig(threshold=10.0))  # skip whenever it may
    with api.cache_context(model):
        first = _forward(model, seed=1)
        cached = _forward(model, seed=1)
    torch.testing.assert_close(first, cached)
    api.reset_cache_state(model)
    with api.cache_context(model):
        other = _forward(model, seed=2)
    assert not torch.allclose(other, first), CHANGED + "CacheMixin._reset_stateful_cache no longer resets the hooks"


def test_public_vae_decode_runs_the_released_chunks():
    torch.manual_seed(0)
    vae = api.AutoencoderKLCogVideoX(**TINY_VAE_CONFIG).eval()
    z = torch.randn(1, TINY_VAE_CONFIG["latent_channels"], 5, 4, 6)
    with torch.no_grad():
        ours = api.decode_vae(vae, z)
        cache, out = None, []
        for start, end in latent_chunks(5):  # the release's loop, written out
            chunk = vae.post_quant_conv(z[:, :, start:end]) if vae.post_quant_conv is not None else z[:, :, start:end]
            chunk, cache = vae.decoder(chunk, conv_cache=cache)
            out.append(chunk)
    assert ours.shape[2] == 17
    np.testing.assert_array_equal(ours.numpy(), torch.cat(out, dim=2).numpy(), err_msg=CHANGED + "VAE decode chunks")



def test_compiled_blocks_names_what_compile_repeated_blocks_compiles(monkeypatch):
    """The marked blocks, and only they, are handed to `Module.compile` (recorded, not compiled)."""
    compiled: list[str] = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, *a, **k: compiled.append(type(self).__name__))
    try:
        _model().compile_repeated_blocks(backend="eager")
    except ValueError as e:
        raise AssertionError(CHANGED + f"compile_repeated_blocks() no longer finds what compiled_blocks() names: {e}") from e
    assert compiled == ["CogVideoXBlock"] * TINY_TRANSFORMER_CONFIG["num_layers"], (
        CHANGED + f"compile_repeated_blocks() compiled {compiled}, not the blocks compiled_blocks() named"
    )
