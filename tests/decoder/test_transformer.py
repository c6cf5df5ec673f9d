"""The diffusers-based DiT against the released formulas, from SAT-named weights with unmerged LoRA."""

from __future__ import annotations

import decoder_sat_reference as ref
import torch

from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
from inference.decoder.pipeline import AnimeGamerDecoder
from inference.decoder.transformer import AnimeGamerTransformer3DModel
from testkit.tiny.decoder import TINY_SIZE, TINY_VAE_CONFIG


def test_motion_scope_embedding_matches_reference(cfg, sat_sd, transformer):
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    scopes = torch.tensor([0.5, 2.5, 10.0, 15.0, 40.0])
    with torch.no_grad():
        ours = transformer.ofs_embedding(transformer.ofs_proj(scopes))
    expected = ref.flow_embedding(sat_sd, scopes, d)
    assert ours.shape == (5, cfg["time_embed_dim"])
    torch.testing.assert_close(ours.double(), expected, rtol=1e-5, atol=1e-5)
    # The released layer shapes: D -> 512 -> 512 (here D -> time_embed_dim -> time_embed_dim).
    assert transformer.ofs_embedding.linear_1.in_features == d
    assert transformer.ofs_embedding.linear_2.out_features == cfg["time_embed_dim"]
    # Different scopes give different embeddings (the branch is live).
    assert (ours[0] - ours[-1]).abs().max() > 1e-2


def test_one_block_matches_released_layer_with_unmerged_lora(cfg, sat_sd, transformer):
    g = torch.Generator().manual_seed(1)
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    text = torch.randn(2, 226, d, generator=g)
    video = torch.randn(2, 30, d, generator=g)
    emb = torch.randn(2, cfg["time_embed_dim"], generator=g)
    with torch.no_grad():
        v_out, t_out = transformer.transformer_blocks[1](video, text, emb)
    expected = ref.sat_layer(sat_sd, 1, torch.cat([text, video], 1).double(), emb.double(), cfg["num_attention_heads"], 226)
    torch.testing.assert_close(torch.cat([t_out, v_out], 1).double(), expected, rtol=1e-4, atol=1e-4)

    # The LoRA matters: without it the reference moves well away from the block's output.
    no_lora = {k: v for k, v in sat_sd.items() if ".matrix_" not in k}
    for k in list(no_lora):
        if k.endswith(".original.weight") or k.endswith(".original.bias"):
            no_lora[k.replace(".original", "")] = no_lora.pop(k)
    plain = ref.sat_layer(no_lora, 1, torch.cat([text, video], 1).double(), emb.double(), cfg["num_attention_heads"], 226)
    assert (plain - expected).abs().max() > 1e-2


def test_full_forward_matches_released_dit(cfg, sat_sd, transformer):
    g = torch.Generator().manual_seed(2)
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    x = torch.randn(2, 5, cfg["in_channels"], cfg["sample_height"], cfg["sample_width"], generator=g)
    ctx = torch.randn(2, 226, d, generator=g)
    t = torch.tensor([999, 339])
    flow = torch.tensor([2.5, 40.0])
    with torch.no_grad():
        ours = transformer.predict_v(x, ctx, t, flow)
    expected = ref.sat_forward(sat_sd, cfg, x, ctx, t, flow)
    torch.testing.assert_close(ours.double(), expected, rtol=1e-4, atol=1e-4)


def test_uncond_embedding_is_the_checkpoints_constant(sat_sd, transformer):
    expected = ref.sat_uncond(sat_sd)
    assert transformer.uncond_embedding.shape == expected.shape == (226, expected.shape[1])
    torch.testing.assert_close(transformer.uncond_embedding.double(), expected, rtol=1e-5, atol=1e-5)


def test_final_norm_eps_differs_from_block_norms(transformer):
    # SAT: norm_final eps 1e-6, every other LayerNorm of the trunk 1e-5; q/k norms 1e-6.
    assert transformer.norm_out.norm.eps == 1e-6
    assert transformer.norm_final.eps == 1e-5
    assert transformer.transformer_blocks[0].norm1.norm.eps == 1e-5
    assert transformer.transformer_blocks[0].attn1.norm_q.eps == 1e-6


def test_attention_backend_can_be_switched(cfg, transformer):
    import copy

    model = copy.deepcopy(transformer)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 5, cfg["in_channels"], cfg["sample_height"], cfg["sample_width"], generator=g)
    ctx = torch.randn(1, 226, 32, generator=g)
    args = (x, ctx, torch.tensor([500]), torch.tensor([2.5]))
    with torch.no_grad():
        default = model.predict_v(*args)
        model.set_attention_backend("_native_math")
        try:
            assert model.transformer_blocks[0].attn1.processor._attention_backend.value == "_native_math"
            math_backend = model.predict_v(*args)
        finally:
            model.set_attention_backend("native")
    torch.testing.assert_close(math_backend, default, rtol=1e-5, atol=1e-5)


def test_the_position_table_is_held_in_the_weights_dtype_with_the_same_output(cfg, converted, tmp_path):
    """from_pretrained leaves diffusers' sin-cos position table in float64 (4x the bytes); the
    decoder keeps it in the weights' dtype, and the DiT's output is the same to the bit."""
    model = AnimeGamerTransformer3DModel(**cfg)
    model.load_state_dict(converted[0], strict=True)
    model.save_pretrained(tmp_path / "dit")
    dit = AnimeGamerTransformer3DModel.from_pretrained(tmp_path / "dit", torch_dtype=torch.bfloat16).eval()
    assert dit.patch_embed.pos_embedding.dtype == torch.float64  # as diffusers leaves it
    g = torch.Generator().manual_seed(3)
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    x = torch.randn(1, 5, cfg["in_channels"], cfg["sample_height"], cfg["sample_width"], generator=g).bfloat16()
    ctx = torch.randn(1, 226, d, generator=g).bfloat16()
    t, flow = torch.tensor([500]), torch.tensor([10.0])
    with torch.no_grad():
        before = dit.predict_v(x, ctx, t, flow)
        held = dit.patch_embed.pos_embedding.nbytes
        AnimeGamerDecoder(dit, AutoencoderKLCogVideoX(**TINY_VAE_CONFIG), steps=1, **TINY_SIZE)
        after = dit.patch_embed.pos_embedding
        assert after.dtype == torch.bfloat16 and after.nbytes * 4 == held
        assert torch.equal(dit.predict_v(x, ctx, t, flow), before)
