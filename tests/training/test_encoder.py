"""The phase-(a) representation encoder against the released SAT checkpoint's keys and formula."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from inference.decoder.convert import convert_transformer_state_dict
from testkit.tiny.decoder import TINY_TRANSFORMER_CONFIG
from tests.decoder.decoder_sat_reference import CLIP_WIDTH, T5_WIDTH, P, make_sat_checkpoint, sat_uncond
from training.encoder import ENCODER_FILE, EncoderError, RepresentationEncoder

torch.set_num_threads(1)  # tiny tensors; the machine is shared

WIDTH = TINY_TRANSFORMER_CONFIG["num_attention_heads"] * TINY_TRANSFORMER_CONFIG["attention_head_dim"]


@pytest.fixture(scope="module")
def sat_sd() -> dict[str, torch.Tensor]:
    return make_sat_checkpoint(dict(TINY_TRANSFORMER_CONFIG), seed=3, lora_rank=64)


@pytest.fixture(scope="module")
def sat_dir(sat_sd, tmp_path_factory):
    """The released layout: `latest` names the iteration, whose folder holds {'module': state_dict}."""
    root = tmp_path_factory.mktemp("sat")
    (root / "latest").write_text("10000\n")
    (root / "10000").mkdir()
    torch.save({"module": sat_sd}, root / "10000" / "mp_rank_00_model_states.pt")
    return root


def reference(sd, text: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
    """The released formula in float64 from the SAT tensors."""
    def w(name):
        return sd[f"{P}mixins.patch_embed.{name}"].double()

    def proj(name, x):
        h = F.gelu(F.linear(x, w(f"{name}.0.weight"), w(f"{name}.0.bias")))
        return F.linear(h, w(f"{name}.2.weight"), w(f"{name}.2.bias"))

    def ln(name, x):
        return F.layer_norm(x, (x.shape[-1],), w(f"{name}.weight"), w(f"{name}.bias"), 1e-5)

    return torch.cat([ln("txt_mix_layer_norm", proj("text_proj", text[..., :30, :].double())),
                      ln("ip_mix_layer_norm", proj("ip_proj", image.double()))], dim=-2)


def test_loads_the_released_keys_and_matches_the_formula(sat_dir, sat_sd):
    encoder = RepresentationEncoder.load(sat_dir)
    assert encoder.dims == {"text_dim": T5_WIDTH, "image_dim": CLIP_WIDTH, "width": WIDTH, "text_tokens": 30,
                            "image_tokens": 196}
    g = torch.Generator().manual_seed(0)
    text, image = torch.randn(2, 226, T5_WIDTH, generator=g), torch.randn(2, 196, CLIP_WIDTH, generator=g)
    with torch.no_grad():
        out = encoder(text, image)
    assert out.shape == (2, 226, WIDTH)
    torch.testing.assert_close(out.double(), reference(sat_sd, text, image), rtol=1e-4, atol=1e-4)
    # the features store 226 T5 tokens; the released embedder's 30 are the first 30
    with torch.no_grad():
        torch.testing.assert_close(encoder(text[:, :30], image), out)


def test_zero_input_is_the_decoders_unconditional_branch(sat_dir, sat_sd):
    encoder = RepresentationEncoder.load(sat_dir)
    with torch.no_grad():
        zeros = encoder(torch.zeros(1, 30, T5_WIDTH), torch.zeros(1, 196, CLIP_WIDTH))[0]
    converted, _ = convert_transformer_state_dict(sat_sd, dict(TINY_TRANSFORMER_CONFIG))
    torch.testing.assert_close(zeros, converted["uncond_embedding"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(encoder.uncond_embedding(), converted["uncond_embedding"])
    torch.testing.assert_close(zeros.double(), sat_uncond(sat_sd), rtol=1e-4, atol=1e-4)


def test_save_and_load_round_trip(tmp_path):
    torch.manual_seed(0)
    encoder = RepresentationEncoder(text_dim=8, image_dim=12, width=16, image_tokens=20)
    path = encoder.save(tmp_path / ENCODER_FILE)
    again = RepresentationEncoder.load(tmp_path)  # the folder holding it
    assert again.dims == encoder.dims
    for (k, v), (k2, v2) in zip(encoder.state_dict().items(), again.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(v, v2)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:  # the names the converter's uncond folding reads
        assert set(f.keys()) == set(encoder.state_dict())


def test_refuses_what_it_cannot_read(tmp_path, sat_sd):
    with pytest.raises(EncoderError, match="no such"):
        RepresentationEncoder.load(tmp_path / "missing.safetensors")
    with pytest.raises(EncoderError, match="no `latest`"):
        RepresentationEncoder.load(tmp_path)
    with_mix = {**sat_sd, f"{P}mixins.patch_embed.mix_proj.weight": torch.zeros(2, 2)}
    torch.save({"module": with_mix}, tmp_path / "mp_rank_00_model_states.pt")
    with pytest.raises(EncoderError, match="mix_proj"):
        RepresentationEncoder.load(tmp_path)
    encoder = RepresentationEncoder(text_dim=8, image_dim=12, width=16, image_tokens=20)
    with pytest.raises(ValueError, match="20"):
        encoder(torch.zeros(1, 30, 8), torch.zeros(1, 196, 12))
