"""The decoder phases on tiny random models and a tiny training folder in the film pipeline's
format (manifest, games, feature shards written as film.features writes them): the training set,
phase (a), both phases' shapes and configs, the engine. Phase (c)'s own tests: test_decoder_c.py."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from accelerate import Accelerator
from diffusers import AutoencoderKLCogVideoX

from film.encoders import T5_TOKENS
from film.features import FORMAT, shard_name, write_shard
from film.games import write_games
from film.manifest import FEATURES_INDEX, Clip, read_manifest, write_lines, write_manifest
from inference.decoder.pipeline import load_decoder
from inference.decoder.transformer import AnimeGamerTransformer3DModel
from testkit.tiny.decoder import TINY_SIZE, TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG
from training import decoder_a, decoder_c
from training.config import RunConfig, default_config_path, load_config
from training.decoder_a import JOINT_PARTS, WARMUP_PARTS, PhaseA, PhaseARecipe, describe_phase_a, make
from training.decoder_c import PhaseC, describe_phase_c
from training.decoder_data import DecoderDataError, clip_items, phase_settings
from training.decoder_recipe import draws, load_transformer, video_tokens
from training.encoder import ENCODER_FILE, RepresentationEncoder
from training.engine import train

torch.set_num_threads(1)  # tiny tensors; the machine is shared

TEXT_DIM, IMAGE_DIM, IMAGE_TOKENS = 8, 12, 196
LATENT = (5, TINY_TRANSFORMER_CONFIG["in_channels"], TINY_TRANSFORMER_CONFIG["sample_height"],
          TINY_TRANSFORMER_CONFIG["sample_width"])


def tiny_decoder_folder(path: Path, seed: int = 0) -> Path:
    """A converted decoder folder as `animegamer convert-decoder` writes it, with tiny random models."""
    torch.manual_seed(seed)
    transformer = AnimeGamerTransformer3DModel(**TINY_TRANSFORMER_CONFIG)
    with torch.no_grad():
        transformer.uncond_embedding.normal_()
    transformer.save_pretrained(str(path / "transformer"))
    AutoencoderKLCogVideoX(**TINY_VAE_CONFIG).save_pretrained(str(path / "vae"))
    (path / "decoder.json").write_text(json.dumps({"format": "animegamer-decoder", "version": 1, "dtype": "fp32",
                                                   "num_latent_frames": 5, "fps": 8, **TINY_SIZE}))
    return path


def tiny_training_folder(path: Path, clips: int = 6, heldout: tuple[int, ...] = (), seed: int = 0,
                         incomplete: tuple[int, ...] = ()) -> Path:
    """Accepted clips of one character (one shot each) with features in one shard. `heldout`: the
    clips whose games are held out (written into games.jsonl after film.games builds it);
    `incomplete`: accepted clips without a social value, so in no game."""
    g = torch.Generator().manual_seed(seed)
    records, tensors = [], {}
    for n in range(clips):
        cid = f"film-{n:04d}-00"
        records.append(Clip(id=cid, source="film.mp4", shot=n, start_s=2.0 * n, end_s=2.0 * n + 2.0,
                            clip=f"clips/{cid}.mp4", stills=(), motion_flow=1.0, motion_level=1 + n % 5,
                            status="accepted", character="qiqi", motion="fly", adverb="quickly",
                            background="sky", time="night", social=None if n in incomplete else n % 2,
                            entertainment=0, stamina=-1,
                            features=shard_name(0)))
        tensors[f"{cid}/latents"] = torch.randn(LATENT, generator=g).to(torch.bfloat16)
        tensors[f"{cid}/image"] = torch.randn(IMAGE_TOKENS, IMAGE_DIM, generator=g).to(torch.bfloat16)
        tensors[f"{cid}/text"] = torch.randn(T5_TOKENS, TEXT_DIM, generator=g).to(torch.bfloat16)
    path.mkdir(parents=True, exist_ok=True)
    (path / "cast.json").write_text(json.dumps({"characters": [{"id": "qiqi", "name": "Qiqi",
                                                                "reference": "references/qiqi.png"}]}))
    write_manifest(path, records)
    write_shard(path / shard_name(0), tensors, {"format": FORMAT, "clips": [r.id for r in records], "texts": {},
                                               "models": {}})
    write_lines(path / FEATURES_INDEX, [json.dumps({r.id: shard_name(0) for r in records})])
    write_games(path, records, heldout=0.0)
    games = [json.loads(line) for line in (path / "games.jsonl").read_text().splitlines()]
    held_ids = {records[i].id for i in heldout}
    out = []
    for game in games:  # one run of consecutive clips: split it so the held-out clips are their own game
        keep = [t for t in game["turns"] if t["clip"] not in held_ids]
        held = [t for t in game["turns"] if t["clip"] in held_ids]
        if keep:
            out.append({**game, "turns": keep})
        if held:
            out.append({**game, "id": held[0]["clip"], "split": "heldout", "turns": held})
    write_lines(path / "games.jsonl", [json.dumps(g) for g in out])
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("decoder_phases")
    return {"data": tiny_training_folder(root / "film", heldout=(5,)),
            "decoder": tiny_decoder_folder(root / "decoder")}


def recipe_a(folders, **settings) -> PhaseARecipe:
    run = RunConfig(max_steps=4, lr=1e-3, gradient_checkpointing=True)
    s = PhaseA(decoder=str(folders["decoder"]), **settings)
    return PhaseARecipe(folders["data"], s, run)


def clip_frames(path: Path | None) -> int:
    import av

    assert path is not None and path.is_file()
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def one_step(recipe, model, step: int, lr: float = 1e-2) -> torch.Tensor:
    """A plain optimizer step on the recipe's groups (no engine), as the engine takes it."""
    opt = torch.optim.AdamW(recipe.param_groups(model), lr=lr, weight_decay=0.0)
    batch = recipe.collate([recipe.dataset()[i] for i in range(2)])
    half = recipe.run.mixed_precision == "bf16"  # as the engine's accelerator.autocast()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=half):
        loss = recipe.loss(model, batch, step)["loss"]
    loss.backward()
    opt.step()
    return loss.detach()


def overfit_losses(recipe, model, steps: int, lr: float = 1e-2) -> list[float]:
    """The loss at each of `steps` plain optimizer steps on one batch, with the same timesteps and
    noise every time (the draws follow from the step number, given as 1 each time)."""
    opt = torch.optim.AdamW(recipe.param_groups(model), lr=lr, weight_decay=0.0)
    batch = recipe.collate([recipe.dataset()[i] for i in range(2)])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = recipe.loss(model, batch, 1)["loss"]
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses

def test_training_set_split_and_flows(folders):
    train, held = clip_items(folders["data"])
    assert [i.id for i in held] == ["film-0005-00"]
    assert len(train) == 5
    # the game's level -> flow table (game.motion): 1 -> 0.5, ..., 5 -> 40
    assert [i.flow for i in train] == [0.5, 2.5, 10.0, 15.0, 40.0]


def test_training_set_errors(tmp_path, folders):
    with pytest.raises(DecoderDataError, match="no manifest.jsonl"):  # film.features' own words
        clip_items(tmp_path)
    bad = tiny_training_folder(tmp_path / "bad", clips=2)
    (bad / FEATURES_INDEX).write_text(json.dumps({"film-0000-00": shard_name(0)}))
    with pytest.raises(DecoderDataError, match="1 accepted clip.*no features"):
        clip_items(bad)
    # a clip film.features leaves out (no motion) is left out here too, not asked for
    partial = tiny_training_folder(tmp_path / "partial", clips=2)
    clips = read_manifest(partial)
    write_manifest(partial, [dataclasses.replace(clips[0], motion=None), clips[1]])
    (partial / FEATURES_INDEX).write_text(json.dumps({"film-0001-00": shard_name(0)}))
    assert [i.id for i in clip_items(partial)[0]] == ["film-0001-00"]


def test_starts_from_cogvideox_own_weights(tmp_path):
    """THUDM/CogVideoX-2b's layout (transformer/ of diffusers' CogVideoXTransformer3DModel, T5-wide
    text projection, 49 frames, no motion-scope embedding) becomes the AnimeGamer DiT."""
    from diffusers import CogVideoXTransformer3DModel

    torch.manual_seed(0)
    arch = {k: TINY_TRANSFORMER_CONFIG[k] for k in ("num_attention_heads", "attention_head_dim", "in_channels",
                                                    "out_channels", "time_embed_dim", "num_layers", "patch_size")}
    stock = CogVideoXTransformer3DModel(**arch, text_embed_dim=8, sample_width=6, sample_height=4, sample_frames=49)
    stock.save_pretrained(str(tmp_path / "CogVideoX-2b" / "transformer"))
    model = load_transformer(tmp_path / "CogVideoX-2b", TINY_TRANSFORMER_CONFIG)
    ours = model.state_dict()
    shared = [k for k in stock.state_dict() if not k.startswith("patch_embed.text_proj.")]
    assert shared and all(torch.equal(ours[k], stock.state_dict()[k]) for k in shared if k in ours)
    assert set(shared) <= set(ours)
    assert torch.count_nonzero(model.ofs_embedding.linear_2.weight) == 0  # flow adds nothing at first
    assert model.config["sample_frames"] == 17 and model.config["text_embed_dim"] == 32
    with pytest.raises(DecoderDataError, match="neither"):
        load_transformer(tmp_path)


def test_draws_depend_on_the_sample_and_step_only():
    latents = torch.zeros(3, *LATENT)
    both = draws(torch.tensor([4, 7, 9]), 5, 0, latents, 0.5, 0.5)
    alone = draws(torch.tensor([7]), 5, 0, latents[:1], 0.5, 0.5)
    assert torch.equal(both.noise[1], alone.noise[0]) and both.t[1] == alone.t[0]
    assert both.drop_text[1] == alone.drop_text[0] and both.drop_image[1] == alone.drop_image[0]
    later = draws(torch.tensor([7]), 6, 0, latents[:1], 0.5, 0.5)
    other_seed = draws(torch.tensor([7]), 5, 1, latents[:1], 0.5, 0.5)
    assert not torch.equal(later.noise, alone.noise) and not torch.equal(other_seed.noise, alone.noise)


def test_warmup_trains_only_its_parts(folders):
    recipe = recipe_a(folders, encoder_warmup_steps=10)
    model = recipe.build_model(Accelerator(cpu=True))
    before = snapshot(model)
    one_step(recipe, model, step=0)
    warm_prefixes = ("transformer.ofs_embedding.", *(f"encoder.{p}." for p in WARMUP_PARTS if p != "flow_embed"))
    changed = {k for k, v in model.named_parameters() if not torch.equal(v, before[k])}
    for k in before:
        assert (k in changed) == k.startswith(warm_prefixes), k
    # the LoRA exists from the start and is untouched: B still zero, no gradient, no optimizer state
    lora_b = [v for k, v in model.named_parameters() if "lora_B" in k]
    assert lora_b and all(torch.count_nonzero(v) == 0 for v in lora_b)
    assert all(v.grad is None for k, v in model.named_parameters() if "lora_" in k or ".norm1.linear." in k)


def test_joint_adds_lora_and_adaln(folders):
    recipe = recipe_a(folders, encoder_warmup_steps=1)
    model = recipe.build_model(Accelerator(cpu=True))
    before = snapshot(model)
    one_step(recipe, model, step=1)  # past the warm-up
    trained = {k for k, v in model.named_parameters() if v.grad is not None}
    changed = {k for k, v in model.named_parameters() if not torch.equal(v, before[k])}
    assert changed <= trained
    # LoRA B moves first (A's gradient is B^T ... = 0 while B is zero), the adaLN of every block
    assert any("lora_B" in k for k in changed) and any("lora_A" in k for k in trained)
    assert any(".norm1.linear." in k for k in changed) and any(".norm2.linear." in k for k in changed)
    assert any(k.startswith("encoder.text_proj.") for k in changed)
    assert any(k.startswith("transformer.ofs_embedding.") for k in changed)
    for k in trained:
        assert ("lora_" in k or ".norm1.linear." in k or ".norm2.linear." in k or k.startswith("encoder.")
                or k.startswith("transformer.ofs_embedding.")), k
    # the frozen base: attention and MLP weights, time embedding, the final layer
    frozen = set(before) - trained
    assert any("base_layer" in k for k in frozen) and any(".ff." in k for k in frozen)
    assert any(k.startswith("transformer.time_embedding.") for k in frozen)
    assert "transformer.norm_out.linear.weight" in frozen
    assert set(JOINT_PARTS) > set(WARMUP_PARTS)


def test_loss_falls_on_an_overfit_batch(folders):
    """One batch with the same timesteps and noise at every step (the draws follow from the step
    number, given as 1 each time): the loss halves within 80 steps of the joint stage."""
    recipe = recipe_a(folders, encoder_warmup_steps=0, text_drop=0.0, image_drop=0.0)
    losses = overfit_losses(recipe, recipe.build_model(Accelerator(cpu=True)), 80)
    assert losses[-1] < 0.5 * losses[0], losses


def test_export_loads_in_the_worker_and_decodes(folders, tmp_path):
    recipe = recipe_a(folders, encoder_warmup_steps=0, export_dtype="fp32")
    model = recipe.build_model(Accelerator(cpu=True))
    for _ in range(2):
        one_step(recipe, model, step=1)
    # a look at the film being learned: a held-out clip through the worker's sampler, LoRA unmerged
    recipe.settings.sample_steps = 2
    sample = recipe.sample(model, tmp_path, 3)
    assert sample == tmp_path / "samples" / "step-0000003.mp4" and clip_frames(sample) == 17
    assert model.training and any("lora_B" in k for k, _ in model.named_parameters())
    paths = recipe.export(model, tmp_path / "export", Accelerator(cpu=True))
    folder = paths[0]
    assert (folder / ENCODER_FILE).is_file()
    decoder = load_decoder(str(folder), device="cpu", dtype=torch.float32, steps=2)
    # the stored unconditional branch is the trained encoder's output for zero features
    encoder = RepresentationEncoder.load(folder / ENCODER_FILE)
    with torch.no_grad():
        zeros = encoder(torch.zeros(1, 30, TEXT_DIM), torch.zeros(1, IMAGE_TOKENS, IMAGE_DIM))[0]
    torch.testing.assert_close(decoder.transformer.uncond_embedding, zeros, rtol=1e-5, atol=1e-5)
    # the merged DiT gives what the trained one (LoRA unmerged) gives
    trained = model.transformer.float()
    x = torch.randn(1, *LATENT)
    rep = torch.randn(1, 226, 32)
    t, flow = torch.tensor([500]), torch.tensor([10.0])
    with torch.no_grad():
        torch.testing.assert_close(decoder.transformer.predict_v(x, rep, t, flow), trained.predict_v(x, rep, t, flow),
                                   rtol=1e-4, atol=1e-4)
    clip = decoder.decode(np.random.default_rng(0).standard_normal((226, 32)).astype(np.float32), 10.0, seed=1)
    assert clip.shape == (17, TINY_SIZE["height"], TINY_SIZE["width"], 3) and clip.dtype == np.uint8


def test_describe_phase_a_full_size():
    facts = describe_phase_a()
    assert facts["video_tokens"] == 6750 == video_tokens()
    assert facts["condition_tokens"] == 226
    # LoRA r=64 on q, k, v, out of 30 layers: 30 * 4 * 64 * (1920 + 1920)
    lora = 30 * 4 * 64 * (1920 + 1920)
    adaln = 30 * 2 * (512 * 6 * 1920 + 6 * 1920)
    flow = 1920 * 512 + 512 + 512 * 512 + 512
    encoder = (4096 * 1920 + 1920 + 1920 * 1920 + 1920) + (768 * 1920 + 1920 + 1920 * 1920 + 1920) + 4 * 1920
    assert facts["trainable_warmup"] == flow + encoder
    assert facts["trainable"] == flow + encoder + adaln + lora
    assert facts["trainable"] + facts["frozen"] == facts["trainable_warmup"] + facts["frozen_warmup"]


def test_memory_shapes_of_the_decoder_phases(folders):
    PhaseShape = pytest.importorskip("training.memory").PhaseShape  # noqa: N806 (a class)

    run = RunConfig(mixed_precision="bf16", gradient_checkpointing=True)
    a = decoder_a.phase_shape(run, {})
    assert isinstance(a, PhaseShape)
    facts = describe_phase_a()
    assert (a.trainable, a.frozen, a.tokens, a.width, a.layers) == (facts["trainable"], facts["frozen"], 6976, 1920, 30)
    assert a.frozen_dtype == "bf16" and a.compute_bytes == 2
    c = decoder_c.phase_shape(RunConfig(), {"decoder": str(folders["decoder"])})  # the folder's tiny DiT
    assert c.frozen_dtype == "fp32" and c.width == 32 and c.layers == 2
    assert c.trainable == describe_phase_c(TINY_TRANSFORMER_CONFIG)["trainable"]


# ---------------------------------------------------------------------------------------------
# Configs and the engine


@pytest.mark.parametrize(("phase", "cls"), [("a", PhaseA), ("c", PhaseC)])
def test_configs_hold_every_setting_with_the_defaults(phase, cls):
    cfg = load_config(default_config_path(phase))
    assert cfg.phase == {f.name: getattr(cls(), f.name) for f in dataclasses.fields(cls)}
    assert cfg.run.gradient_checkpointing and cfg.run.lr == {"a": 2e-4, "c": 5e-5}[phase]
    with pytest.raises(DecoderDataError, match="no setting nope"):
        phase_settings(cls, {**cfg.phase, "nope": 1}, phase)


def test_phase_a_through_the_engine_in_bf16(folders, tmp_path):
    """Both stages in one run of the shared engine (warm-up of 2 steps, then joint), frozen weights
    in bf16, a checkpoint, and the export the worker loads."""
    run = RunConfig(max_steps=4, lr=1e-3, batch_size=2, mixed_precision="bf16", gradient_checkpointing=True,
                    save_every=2, validate_every=2)
    recipe = make(folders["data"], {"decoder": str(folders["decoder"]), "encoder_warmup_steps": 2}, run)  # fp16 export
    result = train(recipe, run, tmp_path / "run", resume=False, progress=False)
    assert result.steps == 4 and len(result.losses) == 4 and len(result.val_losses) == 2
    assert all(np.isfinite(r["loss"]) for r in result.losses)
    folder = result.exported[0]
    assert json.loads((folder / "transformer" / "config.json").read_text())["_class_name"] == "AnimeGamerTransformer3DModel"
    from safetensors import safe_open

    with safe_open(str(folder / "transformer" / "diffusion_pytorch_model.safetensors"), "pt") as f:
        assert f.get_tensor("proj_out.weight").dtype == torch.float16  # as convert-decoder writes it
    decoder = load_decoder(str(folder), device="cpu", dtype=torch.float32, steps=2)
    assert decoder.decode(np.zeros((226, 32), np.float32), 0.5, seed=3).shape[0] == 17


def test_phase_a_on_two_cpu_processes_equals_one(folders, tmp_path):
    """accelerate launch --num_processes 2 --cpu (gloo) across the stage switch (DDP with the joint
    stage's parameters frozen during the warm-up): the same losses as one process, same global batch."""
    single = train(make(*engine_args(folders)[:2], engine_run()), engine_run(), tmp_path / "one", resume=False,
                   progress=False)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--cpu", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "tests.training.test_decoder_recipe",
               str(folders["data"]), str(folders["decoder"]), str(tmp_path / "two")]
    done = subprocess.run(command, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    two = [json.loads(line)["loss"] for line in (tmp_path / "two" / "losses.jsonl").read_text().splitlines()]
    assert two == pytest.approx([r["loss"] for r in single.losses], rel=1e-4, abs=1e-6)


def engine_run() -> RunConfig:
    return RunConfig(max_steps=3, lr=1e-3, batch_size=2, save_every=3, seed=0)


def engine_args(folders) -> tuple[Path, dict]:
    return folders["data"], {"decoder": str(folders["decoder"]), "encoder_warmup_steps": 1, "export_dtype": "fp32",
                             "text_drop": 0.3, "image_drop": 0.3}


if __name__ == "__main__":  # one process of the two-process run above
    data, decoder, out = (Path(a) for a in sys.argv[1:4])
    torch.set_num_threads(1)
    phase = engine_args({"data": data, "decoder": decoder})[1]
    train(make(data, phase, engine_run()), engine_run(), out, resume=False, progress=False)


def test_phase_a_resumed_across_the_stage_switch_gives_the_uninterrupted_curve(folders, tmp_path):
    phase = {"decoder": str(folders["decoder"]), "encoder_warmup_steps": 2, "export_dtype": "fp32"}

    def run(steps: int) -> RunConfig:
        return RunConfig(max_steps=steps, lr=1e-3, batch_size=2, save_every=2, seed=1)

    whole = train(make(folders["data"], phase, run(4)), run(4), tmp_path / "whole", resume=False, progress=False)
    train(make(folders["data"], phase, run(2)), run(2), tmp_path / "cut", resume=False, progress=False)
    resumed = train(make(folders["data"], phase, run(4)), run(4), tmp_path / "cut", resume=True, progress=False)
    assert resumed.resumed_from == 2
    assert [r["loss"] for r in resumed.losses] == pytest.approx([r["loss"] for r in whole.losses], rel=1e-6)
