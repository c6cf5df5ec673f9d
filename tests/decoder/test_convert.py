"""`animegamer convert-decoder` on synthesized SAT files: exact key account, wrong-kind errors."""

from __future__ import annotations

import argparse
import json
import os
import re

import decoder_sat_reference as ref
import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLCogVideoX

from inference.decoder.convert import (
    CheckpointKindError,
    ConversionError,
    convert_decoder,
    convert_decoder_main,
    convert_transformer_state_dict,
    convert_vae_state_dict,
)
from inference.decoder.latent_preview import LatentRGB
from inference.decoder.pipeline import load_decoder
from inference.decoder.vae import latent_chunks
from testkit.tiny.decoder import TINY_SIZE, TINY_VAE_CONFIG


def diffusers_vae_key_to_sat(key: str) -> str:
    """The 3d-vae.pt naming (sgm cp_enc_dec), written independently of the converter."""
    m = re.match(r"^(encoder|decoder)\.mid_block\.resnets\.(\d+)\.(.*)$", key)
    if m:
        return f"{m[1]}.mid.block_{int(m[2]) + 1}.{m[3]}"
    m = re.match(r"^decoder\.up_blocks\.(\d+)\.(.*)$", key)
    if m:
        key = f"decoder.up.{3 - int(m[1])}.{m[2]}"
    key = key.replace("encoder.down_blocks.", "encoder.down.")
    key = key.replace(".resnets.", ".block.")
    key = key.replace(".downsamplers.0.", ".downsample.").replace(".upsamplers.0.", ".upsample.")
    return key.replace(".conv_shortcut.", ".nin_shortcut.")


@pytest.fixture(scope="module")
def tiny_vae() -> AutoencoderKLCogVideoX:
    torch.manual_seed(5)
    return AutoencoderKLCogVideoX(**TINY_VAE_CONFIG).eval()


@pytest.fixture(scope="module")
def files(tmp_path_factory, sat_sd, tiny_vae):
    root = tmp_path_factory.mktemp("release")
    sat_dir = root / "VDM_Decoder-Qiqi"
    (sat_dir / "10000").mkdir(parents=True)
    (sat_dir / "latest").write_text("10000\n")
    torch.save({"module": sat_sd}, sat_dir / "10000" / "mp_rank_00_model_states.pt")
    vae_sd = {diffusers_vae_key_to_sat(k): v.clone() for k, v in tiny_vae.state_dict().items()}
    vae_sd["loss.discriminator.conv.weight"] = torch.randn(2, 2)
    vae_file = root / "3d-vae.pt"
    torch.save({"state_dict": vae_sd}, vae_file)
    return sat_dir, vae_file, vae_sd


@pytest.fixture(scope="module")
def converted_dir(tmp_path_factory, files, cfg):
    sat_dir, vae_file, _ = files
    out = tmp_path_factory.mktemp("converted")
    report = convert_decoder(
        str(sat_dir), str(vae_file), str(out), dtype="fp32",
        transformer_config=cfg, vae_config=TINY_VAE_CONFIG,
        settings={"num_latent_frames": 5, "fps": 8, **TINY_SIZE},
    )
    return out, report


def test_every_key_is_accounted_for(converted_dir, sat_sd, files):
    out, report = converted_dir
    _, _, vae_sd = files
    assert set(report["transformer"]["keys"]) == set(sat_sd)
    assert set(report["vae"]["keys"]) == set(vae_sd)
    keys = report["transformer"]["keys"]
    assert keys["conditioner.embedders.0.transformer.shared.weight"]["action"] == "skipped"
    assert keys["first_stage_model.decoder.conv_in.conv.weight"]["action"] == "skipped"
    assert keys[f"{ref.P}transformer.layers.0.attention.query_key_value.matrix_B.2"]["action"] == "lora-merged+split"
    assert keys[f"{ref.P}transformer.layers.1.attention.dense.matrix_A.0"]["action"] == "lora-merged"
    assert keys[f"{ref.P}mixins.patch_embed.ip_proj.0.weight"]["targets"] == ["uncond_embedding"]
    assert keys[f"{ref.P}mixins.patch_embed.output_mix_layer_norm.weight"]["action"] == "skipped"
    assert keys[f"{ref.P}mixins.pos_embed.pos_embedding"]["action"] == "checked"
    assert report["vae"]["keys"]["loss.discriminator.conv.weight"]["action"] == "skipped"
    on_disk = json.loads((out / "conversion_account.json").read_text())
    assert on_disk["transformer"]["summary"] == report["transformer"]["summary"]
    for part in ("transformer", "vae"):
        assert sorted(os.listdir(out / part)) == ["config.json", "diffusion_pytorch_model.safetensors"]


def test_conversion_stores_the_preview_map_and_loading_uses_it(converted_dir):
    out, _ = converted_dir
    stored = LatentRGB.load(str(out))
    assert stored is not None and stored.weight.shape == (4, 3)
    dec = load_decoder(str(out), device="cpu", dtype="fp32")
    assert dec.preview_map is not None and np.array_equal(dec.preview_map.weight, stored.weight)


def test_a_preview_map_that_cannot_be_fitted_leaves_the_decoder_loadable(converted_dir, tmp_path, monkeypatch, caplog):
    """A decoder converted before previews existed has its map fitted at load; when that fit fails,
    the decoder still loads and makes clips, and asking it for a preview says why there is none."""
    import shutil

    import inference.decoder.latent_preview as latent_preview

    out = tmp_path / "converted-before-previews"
    shutil.copytree(converted_dir[0], out)
    os.remove(out / latent_preview.FILE_NAME)

    def broken(vae):
        raise RuntimeError("tiles do not fit")

    monkeypatch.setattr(latent_preview, "fit_latent_rgb", broken)
    dec = load_decoder(str(out), device="cpu", dtype="fp32")
    assert dec.preview_map is None and "tiles do not fit" in (dec.preview_unavailable or "")
    assert "turns run without previews" in caplog.text
    with pytest.raises(RuntimeError, match="fitting it failed"):
        dec.preview_rgb(torch.zeros(5, 4, 4, 6))


def test_lora_is_merged_with_scale_one_over_rank(converted, sat_sd):
    sd, _ = converted
    base = f"{ref.P}transformer.layers.0.attention.query_key_value"
    w = sat_sd[f"{base}.original.weight"]
    delta = torch.cat([sat_sd[f"{base}.matrix_B.{i}"] @ sat_sd[f"{base}.matrix_A.{i}"] for i in range(3)])
    assert sat_sd[f"{base}.matrix_A.0"].shape[0] == 64
    merged = torch.cat([sd[f"transformer_blocks.0.attn1.to_{n}.weight"] for n in "qkv"])
    torch.testing.assert_close(merged, w + delta / 64)


def test_loaded_directory_reproduces_the_reference(converted_dir, cfg, sat_sd, tiny_vae):
    out, _ = converted_dir
    dec = load_decoder(str(out), device="cpu", dtype="fp32")
    assert dec.steps == 50 and dec.fps == 8 and dec.latent_shape == (5, 4, 4, 6)
    g = torch.Generator().manual_seed(9)
    x = torch.randn(1, 5, 4, 4, 6, generator=g)
    ctx = torch.randn(1, 226, 32, generator=g)
    with torch.no_grad():
        v = dec.transformer.predict_v(x, ctx, torch.tensor([499]), torch.tensor([10.0]))
    torch.testing.assert_close(v.double(), ref.sat_forward(sat_sd, cfg, x, ctx, torch.tensor([499]), torch.tensor([10.0])), rtol=1e-4, atol=1e-4)
    for k, t in tiny_vae.state_dict().items():
        torch.testing.assert_close(dec.vae.state_dict()[k], t, rtol=0, atol=0)


def test_fp16_output_and_cli_entry_point(files, tmp_path, cfg, capsys):
    sat_dir, vae_file, _ = files
    rc = convert_decoder_main([str(sat_dir), str(vae_file), str(tmp_path / "out")], cfg, TINY_VAE_CONFIG)
    assert rc == 0
    text = capsys.readouterr().out
    assert "lora-merged" in text and "conditioner.embedders.*" in text
    from safetensors import safe_open

    with safe_open(str(tmp_path / "out" / "transformer" / "diffusion_pytorch_model.safetensors"), "pt") as f:
        assert f.get_tensor("proj_out.weight").dtype == torch.float16


def test_wrong_kind_of_file_is_a_clear_error(files, tmp_path, cfg, capsys):
    sat_dir, vae_file, _ = files
    sat_file = sat_dir / "10000" / "mp_rank_00_model_states.pt"
    # The VAE where the decoder belongs, and the decoder where the VAE belongs.
    with pytest.raises(CheckpointKindError, match="3D VAE checkpoint"):
        convert_decoder(str(vae_file), str(vae_file), str(tmp_path / "a"), transformer_config=cfg, vae_config=TINY_VAE_CONFIG)
    with pytest.raises(CheckpointKindError, match="SAT decoder checkpoint"):
        convert_decoder(str(sat_dir), str(sat_file), str(tmp_path / "b"), transformer_config=cfg, vae_config=TINY_VAE_CONFIG)
    # The MLLM agent file.
    mllm = tmp_path / "pytorch_model.bin"
    torch.save({"llm.base_model.model.lm_head.weight": torch.zeros(2, 2)}, mllm)
    with pytest.raises(CheckpointKindError, match="MLLM"):
        convert_decoder(str(mllm), str(vae_file), str(tmp_path / "c"), transformer_config=cfg, vae_config=TINY_VAE_CONFIG)
    # Not a checkpoint at all, through the CLI: exit code 2 and a message, no traceback.
    junk = tmp_path / "notes.pt"
    junk.write_text("hello")
    assert convert_decoder_main([str(junk), str(vae_file), str(tmp_path / "d")]) == 2
    assert "not a torch checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "d").exists()


def test_unknown_dit_key_is_an_error_not_dropped(sat_sd, cfg):
    sd = dict(sat_sd)
    sd[f"{ref.P}mixins.ip_crossattention.0.to_k.weight"] = torch.zeros(2, 2)
    with pytest.raises(ConversionError, match="no conversion rule.*ip_crossattention"):
        convert_transformer_state_dict(sd, cfg)


def test_non_tensor_dit_entry_is_an_error(sat_sd, cfg):
    sd = dict(sat_sd)
    sd[f"{ref.P}transformer.layers.0._extra_state"] = {"note": 1}
    with pytest.raises(ConversionError, match="not tensors.*_extra_state"):
        convert_transformer_state_dict(sd, cfg)


def test_geometry_mismatch_and_missing_keys_are_errors(sat_sd, cfg):
    with pytest.raises(ConversionError, match="pos_embedding"):
        convert_transformer_state_dict(sat_sd, {**cfg, "sample_width": 8})
    sd = {k: v for k, v in sat_sd.items() if "final_layer.linear" not in k}
    with pytest.raises(ConversionError, match="final_layer.linear"):
        convert_transformer_state_dict(sd, cfg)


def test_fused_qkv_that_does_not_split_in_three_is_an_error(sat_sd, cfg):
    base = f"{ref.P}transformer.layers.0.attention.query_key_value"
    sd = {k: v for k, v in sat_sd.items() if not k.startswith(base)}
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    sd[f"{base}.weight"], sd[f"{base}.bias"] = torch.zeros(3 * d - 1, d), torch.zeros(3 * d - 1)
    with pytest.raises(ConversionError, match="query_key_value has .* rows.*three equal"):
        convert_transformer_state_dict(sd, cfg)


def test_pickle_with_objects_needs_trust(files, tmp_path, cfg):
    sat_dir, vae_file, _ = files
    sd = torch.load(sat_dir / "10000" / "mp_rank_00_model_states.pt", weights_only=True)["module"]
    odd = tmp_path / "ds" / "1"
    odd.mkdir(parents=True)
    (tmp_path / "ds" / "latest").write_text("1")
    torch.save({"module": sd, "client": argparse.Namespace(lr=1)}, odd / "mp_rank_00_model_states.pt")
    kwargs = {"transformer_config": cfg, "vae_config": TINY_VAE_CONFIG, "dtype": "fp32"}
    with pytest.raises(ConversionError, match="--trust-pickle"):
        convert_decoder(str(tmp_path / "ds"), str(vae_file), str(tmp_path / "o1"), **kwargs)
    convert_decoder(str(tmp_path / "ds"), str(vae_file), str(tmp_path / "o2"), trust_pickle=True, **kwargs)


def test_vae_key_map_on_named_examples():
    sd = {
        "encoder.down.0.block.1.conv1.conv.weight": torch.zeros(1),
        "encoder.down.2.downsample.conv.weight": torch.zeros(1),
        "encoder.mid.block_2.norm1.norm_layer.weight": torch.zeros(1),
        "decoder.up.0.block.0.nin_shortcut.conv.weight": torch.zeros(1),
        "decoder.up.3.upsample.conv.weight": torch.zeros(1),
        "decoder.mid.block_1.conv2.conv.weight": torch.zeros(1),
        "decoder.conv_in.conv.weight": torch.zeros(1),
    }
    out, account = convert_vae_state_dict(sd)
    assert sorted(out) == sorted([
        "encoder.down_blocks.0.resnets.1.conv1.conv.weight",
        "encoder.down_blocks.2.downsamplers.0.conv.weight",
        "encoder.mid_block.resnets.1.norm1.norm_layer.weight",
        "decoder.up_blocks.3.resnets.0.conv_shortcut.conv.weight",
        "decoder.up_blocks.0.upsamplers.0.conv.weight",
        "decoder.mid_block.resnets.0.conv2.conv.weight",
        "decoder.conv_in.conv.weight",
    ])
    assert account.entries["decoder.conv_in.conv.weight"]["action"] == "kept"


def test_vae_decodes_five_latent_frames_in_the_released_chunks(tiny_vae):
    from inference.decoder.vae import decode_latents

    assert latent_chunks(5) == [(0, 3), (3, 5)]
    assert latent_chunks(13) == [(0, 3), (3, 5), (5, 7), (7, 9), (9, 11), (11, 13)]
    z = torch.randn(1, 5, 4, 4, 6, generator=torch.Generator().manual_seed(0))
    video = decode_latents(tiny_vae, z)
    assert video.shape == (1, 3, 17, 32, 48)
    # diffusers' own frame batching splits 5 latent frames the same way.
    with torch.no_grad():
        stock = tiny_vae.decode((z / tiny_vae.config.scaling_factor).permute(0, 2, 1, 3, 4)).sample
    torch.testing.assert_close(video, stock)
    # Decoding the chunks independently (no causal cache) would differ: the cache is carried.
    with torch.no_grad():
        zz = (z / tiny_vae.config.scaling_factor).permute(0, 2, 1, 3, 4)
        separate = torch.cat([tiny_vae.decoder(zz[:, :, :3])[0], tiny_vae.decoder(zz[:, :, 3:])[0]], dim=2)
    assert not np.allclose(separate.numpy(), video.numpy(), atol=1e-5)


def test_diffusers_vae_folder_is_accepted_as_is(files, tmp_path, cfg, tiny_vae):
    """`models download` fetches the VAE in diffusers layout (THUDM/CogVideoX-2b vae/)."""
    sat_dir, _, _ = files
    vae_dir = tmp_path / "cogvideox-vae"
    tiny_vae.save_pretrained(vae_dir)
    out = tmp_path / "out"
    report = convert_decoder(
        str(sat_dir), str(vae_dir), str(out), dtype="fp32",
        transformer_config=cfg, vae_config=TINY_VAE_CONFIG,
        settings={"num_latent_frames": 5, "fps": 8, **TINY_SIZE},
    )
    assert report["vae"]["summary"] == {"kept": len(tiny_vae.state_dict())}
    reloaded = AutoencoderKLCogVideoX.from_pretrained(out / "vae")
    for k, v in tiny_vae.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[k], v)


def test_folder_without_a_vae_is_a_clear_error(files, tmp_path, cfg):
    sat_dir, _, _ = files
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointKindError, match="not a diffusers VAE folder"):
        convert_decoder(str(sat_dir), str(tmp_path / "empty"), str(tmp_path / "o"), transformer_config=cfg, vae_config=TINY_VAE_CONFIG)
