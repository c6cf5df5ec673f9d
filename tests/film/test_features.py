"""film.features on tiny random encoders (testkit/tiny/encoders.py) loaded by the real loaders, over a
folder of real MP4 clips made by ffmpeg: shard contents, the index, the manifest, resume after an
interruption (the same bytes as an uninterrupted run), and the errors a user can meet.

The clips are 17 frames at 64x96, not 480x720: even the tiny VAE takes 10-30 s on a full-size
clip on this CPU (tiled into 240x360 tiles, as the real VAE tiles it: 5 x 60 x 90 latents). At
64x96 a clip is one tile; the loader's tiling is checked as a setting."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors import safe_open

from film import features
from film.cast import load_cast, save_cast
from film.encoders import T5_TOKENS, encode_latents, load_t5, load_vae, text_features
from film.manifest import (
    FEATURES_INDEX,
    MANIFEST,
    Clip,
    append_review,
    read_features_index,
    read_manifest,
    write_manifest,
)
from game.instruction import format_instruction
from testkit.tiny.encoders import CLIP_VISION, T5_D_MODEL, build_clip, build_t5, build_vae

H, W = 64, 96
LATENT_CHANNELS = 4  # testkit.tiny.decoder's VAE


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {"vae": build_vae(root / "decoder"), "clip": build_clip(root / "clip"),
            "t5": build_t5(root / "cogvideox")}


def make_mp4(path: Path, hue: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=s={W}x{H}:r=8,hue=h={hue}",
                    "-frames:v", "17", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(path)],
                   check=True)


def clip_record(i: int, status: str, **fields) -> Clip:
    cid = f"film-0001-{i:02d}"
    return Clip(id=cid, source="film.mp4", shot=1, start_s=2.125 * i, end_s=2.125 * (i + 1), clip=f"clips/{cid}.mp4",
                stills=(), motion_flow=2.0, motion_level=2, status=status, **fields)


FIELDS = {"character": "qiqi", "motion": "walk along the street", "adverb": "slowly", "background": "town",
          "time": "morning", "social": 0, "entertainment": 1, "stamina": -1, "caption_level": 2}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A prepared folder: 3 accepted clips (one by a review edit), one captioned, one rejected."""
    folder = tmp_path_factory.mktemp("film")
    ref = folder.parent / "qiqi.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(ref)
    (folder.parent / "cast.toml").write_text('[[characters]]\nid = "qiqi"\nname = "Qiqi"\nreference = "qiqi.png"\n')
    save_cast(load_cast(folder.parent / "cast.toml"), folder)
    clips = [clip_record(0, "accepted", **FIELDS), clip_record(1, "rejected"),
             clip_record(2, "accepted", **{**FIELDS, "motion": "run", "adverb": None, "time": None}),
             clip_record(3, "captioned", **FIELDS), clip_record(4, "accepted", **FIELDS)]
    for i, c in enumerate(clips):
        make_mp4(folder / c.clip, hue=40 * i)
    write_manifest(folder, [replace(c, status="captioned") if c.id.endswith("04") else c for c in clips])
    append_review(folder, "film-0001-04", {"status": "accepted"})  # accepted on the review page
    return folder


def copy(pristine: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "film"
    shutil.copytree(pristine, folder)
    return folder


def run(folder: Path, models: dict[str, Path], batch: int = 2) -> int:
    return features.compute(folder, vae=models["vae"], t5=models["t5"], clip=models["clip"], batch=batch,
                            progress=False)


@pytest.fixture(scope="module")
def computed(pristine, models, tmp_path_factory) -> Path:
    folder = copy(pristine, tmp_path_factory.mktemp("computed"))
    mp = pytest.MonkeyPatch()
    mp.setattr(features, "SHARD_CLIPS", 2)
    try:
        assert run(folder, models) == 0
    finally:
        mp.undo()
    return folder


ACCEPTED = ["film-0001-00", "film-0001-02", "film-0001-04"]


def test_shards_hold_each_accepted_clip_and_the_index_names_them(computed):
    index = read_features_index(computed)
    assert index == {"film-0001-00": "features/shard-00000.safetensors",
                     "film-0001-02": "features/shard-00000.safetensors",
                     "film-0001-04": "features/shard-00001.safetensors"}
    assert json.loads((computed / FEATURES_INDEX).read_text()) == index
    for rel in sorted(set(index.values())):
        with safe_open(str(computed / rel), framework="pt") as f:
            meta = json.loads(f.metadata()["animegamer"])
            assert sorted(f.keys()) == sorted(f"{cid}/{k}" for cid in meta["clips"] for k in ("latents", "image", "text"))
            for cid in meta["clips"]:
                latents, image, text = (f.get_tensor(f"{cid}/{k}") for k in ("latents", "image", "text"))
                assert latents.shape == (5, LATENT_CHANNELS, H // 8, W // 8)  # 17 frames -> 5 latent frames
                assert image.shape == ((CLIP_VISION["image_size"] // CLIP_VISION["patch_size"]) ** 2,
                                       CLIP_VISION["hidden_size"])
                assert text.shape == (T5_TOKENS, T5_D_MODEL) == (30, T5_D_MODEL)
                assert {latents.dtype, image.dtype, text.dtype} == {torch.bfloat16}
                assert torch.isfinite(latents.float()).all() and latents.float().std() > 0
        assert meta["format"] == "animegamer-film-features/1"
        assert set(meta["models"]) == {"vae", "t5", "clip"}
    assert meta["texts"] == {"film-0001-04": "Character: Qiqi; Motion: slowly walk along the street; Background: morning town."}


def test_the_tensors_are_what_the_encoders_give(computed, models):
    """Latents: the VAE's posterior mean x scaling factor of the clip's frames; text: T5 over the
    instruction built from the clip's fields."""
    clip = next(c for c in read_manifest(computed) if c.id == "film-0001-02")
    frames = features.read_clip_frames(computed, clip)
    vae = load_vae(models["vae"], torch.device("cpu"), torch.float32)
    assert vae.use_tiling and vae.use_slicing and not vae.training
    expected = encode_latents(vae, frames[None])[0].to(torch.bfloat16)
    tokenizer, t5 = load_t5(models["t5"], torch.device("cpu"), torch.float32)
    text = format_instruction(["Qiqi"], "run", "", "town", "")
    expected_text = text_features(tokenizer, t5, [text])[0].to(torch.bfloat16)
    with safe_open(str(computed / "features/shard-00000.safetensors"), framework="pt") as f:
        assert torch.equal(f.get_tensor("film-0001-02/latents"), expected)
        assert torch.equal(f.get_tensor("film-0001-02/text"), expected_text)
        assert not torch.equal(f.get_tensor("film-0001-00/image"), f.get_tensor("film-0001-02/image"))


def test_the_manifest_names_each_clips_shard_and_keeps_the_rest(computed, pristine):
    before = {c.id: c for c in read_manifest(pristine)}
    index = read_features_index(computed)
    for c in read_manifest(computed):
        assert c == replace(before[c.id], features=index.get(c.id))
    assert [c.id for c in read_manifest(computed) if c.features] == ACCEPTED


def test_an_interrupted_run_continues_to_the_same_bytes(pristine, computed, models, tmp_path, monkeypatch):
    folder = copy(pristine, tmp_path)
    monkeypatch.setattr(features, "SHARD_CLIPS", 2)
    written: list[str] = []
    real_write = features.write_shard

    def killed_after_one_shard(path: Path, tensors, meta) -> None:
        if written:
            raise KeyboardInterrupt  # Ctrl-C while the second shard is being written
        real_write(path, tensors, meta)
        written.append(path.name)

    monkeypatch.setattr(features, "write_shard", killed_after_one_shard)
    with pytest.raises(KeyboardInterrupt):
        run(folder, models)
    assert read_features_index(folder) == {"film-0001-00": "features/shard-00000.safetensors",
                                           "film-0001-02": "features/shard-00000.safetensors"}
    assert not (folder / "features/shard-00001.safetensors").exists()
    monkeypatch.setattr(features, "write_shard", real_write)
    loads: list[Path] = []
    real_load = features.encode_latents

    def counting(vae, frames):
        loads.append(frames.shape[0])
        return real_load(vae, frames)

    monkeypatch.setattr(features, "encode_latents", counting)
    assert run(folder, models) == 0
    assert loads == [1]  # only the clip of the unfinished shard
    for rel in ("features/shard-00000.safetensors", "features/shard-00001.safetensors", FEATURES_INDEX, MANIFEST):
        assert (folder / rel).read_bytes() == (computed / rel).read_bytes(), rel
    assert run(folder, models) == 0  # nothing left: the same files again
    assert loads == [1]
    assert (folder / MANIFEST).read_bytes() == (computed / MANIFEST).read_bytes()


def test_clear_errors_without_a_traceback(pristine, computed, models, tmp_path, capsys):
    folder = copy(pristine, tmp_path)
    assert features.compute(folder, vae=tmp_path / "nowhere", t5=models["t5"], clip=models["clip"], batch=1,
                            progress=False) == 2
    assert capsys.readouterr().err == f"animegamer film features: --vae {tmp_path / 'nowhere'}: no such folder\n"
    assert features.compute(folder, vae=models["clip"], t5=models["t5"], clip=models["clip"], batch=1,
                            progress=False) == 2
    assert capsys.readouterr().err == (f"animegamer film features: --vae {models['clip']}: a model folder, not the "
                                       "CogVideoX VAE (AutoencoderKLCogVideoX)\n")
    assert features.compute(folder, vae=models["vae"], t5=models["t5"], clip=models["t5"] / "text_encoder", batch=1,
                            progress=False) == 2
    assert capsys.readouterr().err == (f"animegamer film features: --clip {models['t5'] / 'text_encoder'}: a t5 "
                                       "folder, not a CLIP model\n")

    write_manifest(folder, [replace(c, status="rejected") for c in read_manifest(folder)])
    (folder / "review.jsonl").unlink()
    assert run(folder, models) == 2
    assert capsys.readouterr().err == f"animegamer film features: {folder}: no accepted clips (accept some on the review page: animegamer film review DIR)\n"
    (folder / MANIFEST).unlink()
    assert run(folder, models) == 2
    assert "no manifest.jsonl" in capsys.readouterr().err
    assert not (folder / "features").exists()

    other = copy(computed, tmp_path / "other")  # features made with other models
    moved = tmp_path / "moved"  # the same models elsewhere: the same models
    shutil.copytree(models["clip"], moved / "clip")
    assert features.compute(other, vae=models["vae"], t5=models["t5"], clip=moved / "clip", batch=1, progress=False) == 0
    capsys.readouterr()
    build_clip(moved / "clip", seed=1)  # another checkpoint of the same architecture
    assert features.compute(other, vae=models["vae"], t5=models["t5"], clip=moved / "clip", batch=1, progress=False) == 2
    assert "computed with other models" in capsys.readouterr().err


def test_a_broken_clip_is_named_and_finished_shards_stay(pristine, models, tmp_path, capsys, monkeypatch):
    folder = copy(pristine, tmp_path)
    monkeypatch.setattr(features, "SHARD_CLIPS", 2)
    (folder / "clips/film-0001-04.mp4").write_bytes(b"not a video")
    assert run(folder, models, batch=1) == 2
    err = capsys.readouterr().err
    assert f"animegamer film features: {folder / 'clips/film-0001-04.mp4'}: cannot read clip film-0001-04" in err
    assert "Traceback" not in err
    assert set(read_features_index(folder)) == {"film-0001-00", "film-0001-02"}


def test_a_checkpoint_missing_weights_is_refused_not_left_random(models, tmp_path):
    from safetensors.torch import load_file, save_file

    from film.encoders import ModelFolderError, load_clip

    broken = tmp_path / "clip"
    shutil.copytree(models["clip"], broken)
    weights = load_file(str(broken / "model.safetensors"))
    del weights["vision_model.post_layernorm.weight"]
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelFolderError, match=r"not a CLIPVisionModel checkpoint: 1 weight\(s\) missing, "
                                               r"e\.g\. \S*post_layernorm\.weight"):
        load_clip(broken, torch.device("cpu"), torch.float32)
    assert load_clip(models["clip"], torch.device("cpu"), torch.float32).training is False


def test_a_full_size_vit_b_16_gives_the_decoders_196_by_768_tokens():
    """The released decoder's ip_proj reads 196 x 768: a ViT-B/16's config (transformers' defaults
    with 16 px patches; 2 of its 12 blocks and random weights: the shape is the point) gives that."""
    from transformers import CLIPVisionConfig, CLIPVisionModel

    from film.encoders import image_features

    torch.manual_seed(0)
    model = CLIPVisionModel(CLIPVisionConfig(patch_size=16, hidden_act="gelu", num_hidden_layers=2)).eval()
    frame = np.random.default_rng(0).integers(0, 255, (1, 480, 720, 3), dtype=np.uint8)
    assert image_features(model, frame).shape == (1, 196, 768)
